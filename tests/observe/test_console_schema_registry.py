"""The console's schema registry panel: subjects with their latest version, id, type and compatibility level, in
the JSON of ``/api/cluster`` and on the page in headless Chromium; no panel on a cluster without a registry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from scrape import get_json, wait_for
from test_console_browser import _text

from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster

webdriver = pytest.importorskip("selenium.webdriver")


@pytest.fixture
def one_broker(tmp_path: Path) -> Iterator[ThreadedCluster]:
    cluster = ThreadedCluster(1, tmp_path / "cluster", overrides=dict(FAST_TEST_OVERRIDES), metrics_ports=[0])
    try:
        yield cluster.start()
    finally:
        cluster.close()


def _row(driver: webdriver.Chrome, subject: str) -> list[str]:
    return list(driver.execute_script(
        "const r = document.querySelector(arguments[0]);"
        "return r ? Array.from(r.cells).map(c => c.innerText) : [];", f'tr[data-subject="{subject}"]'))


def test_the_console_lists_subjects(one_broker: ThreadedCluster, browser: webdriver.Chrome) -> None:
    cluster = one_broker
    port = cluster.run(lambda: cluster.cluster.brokers[cluster.broker_ids[0]].metrics_port)
    page = f"http://127.0.0.1:{port}/"
    assert get_json(page + "api/cluster")["schema_registry"] is None
    browser.get(page)
    wait_for(lambda: _text(browser, "#summary"), lambda text: text.startswith("cluster "), 20, "the page drawn")
    assert browser.execute_script("return document.getElementById('registry').hidden") is True

    client = SchemaRegistryClient({"url": cluster.schema_registry_url})
    client.register_schema("orders-value", Schema('"string"', "AVRO"))
    client.register_schema("orders-value", Schema('["string", "null"]', "AVRO"))
    client.register_schema("users-value", Schema('{"type": "object"}', "JSON"))
    client.set_compatibility("users-value", "FULL")

    view = get_json(page + "api/cluster")["schema_registry"]
    assert view["url"] == cluster.schema_registry_url and view["compatibility"] == "BACKWARD"
    assert view["subjects"] == [
        {"subject": "orders-value", "version": 2, "id": 2, "type": "AVRO", "compatibility": "BACKWARD"},
        {"subject": "users-value", "version": 1, "id": 3, "type": "JSON", "compatibility": "FULL"}]
    wait_for(lambda: _row(browser, "users-value"), lambda row: row == ["users-value", "1", "3", "JSON", "FULL"], 20,
             "the page listing users-value")
    assert _row(browser, "orders-value") == ["orders-value", "2", "2", "AVRO", "BACKWARD"]
    assert cluster.schema_registry_url in _text(browser, "#registrySummary")
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == [], errors
