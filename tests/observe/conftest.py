from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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
