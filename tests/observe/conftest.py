from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster


@pytest.fixture
def observed_cluster(tmp_path: Path) -> Iterator[ThreadedCluster]:
    """Three brokers on racks a, b, c, each serving /metrics and the console on a free port."""
    cluster = ThreadedCluster(3, tmp_path / "cluster", racks=["a", "b", "c"], overrides=dict(FAST_TEST_OVERRIDES),
                              metrics_ports=[0, 0, 0])
    try:
        yield cluster.start()
    finally:
        cluster.close()


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium driven by selenium (the tests that take it skip without selenium)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("Debian's chromium and chromium-driver are needed (make sysdeps installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1500,1100"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
