"""The web console in a real headless Chromium (Debian's chromium and chromium-driver, driven by selenium).

Selenium rather than playwright: Debian packages a chromedriver built with the very chromium it packages, so the
pair always matches and nothing is downloaded at test time; playwright's Python package wants its own browser
build (fetched from the network) and supports a foreign executable only loosely.

The page is served by a broker that is neither the controller nor the one killed, so what it shows of the other
brokers (groups, the controller's transitions) comes through its peers, as it must from any broker.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from scrape import wait_for

from kafka_clients import opened
from odradek.testing import ThreadedCluster

webdriver = pytest.importorskip("selenium.webdriver")

# The page redraws every second, so elements found by one call may be gone by the next: everything is read in one
# script run, which the page's own redraw cannot interleave with.
def _text(driver: webdriver.Chrome, selector: str) -> str:
    return str(driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';", selector))


def _leader_cell(driver: webdriver.Chrome, partition: str) -> int | None:
    leader = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.dataset.leader : null;",
        f'tr[data-partition="{partition}"]')
    return None if leader is None else int(leader)


def _broker_row_text(driver: webdriver.Chrome, broker: int) -> str:
    return _text(driver, f'tr[data-broker="{broker}"]')


def _shot(driver: webdriver.Chrome, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    wanted = os.environ.get("ODRADEK_SCREENSHOT_DIR")  # `make screenshots` refreshes docs/ this way
    if wanted:
        shutil.copy(path, Path(wanted) / name)


def test_console_shows_a_broker_dying_and_its_leaders_moving(
    observed_cluster: ThreadedCluster, browser: webdriver.Chrome, tmp_path: Path,
) -> None:
    cluster = observed_cluster
    admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
    admin.create_topics([NewTopic("orders", 3, 3)])["orders"].result(30)
    producer = opened(Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"}))
    for i in range(60):
        producer.produce("orders", value=b"o%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    consumer = opened(Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "shipping",
                                "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    try:
        consumer.subscribe(["orders"])
        got = 0
        deadline = time.monotonic() + 30
        while got < 25 and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                got += 1
        consumer.commit(asynchronous=False)

        controller = cluster.wait_for_controller()
        page_broker, victim = [b for b in cluster.broker_ids if b != controller][:2]
        port = cluster.run(lambda: cluster.cluster.brokers[page_broker].metrics_port)
        leaders = cluster.run(lambda: [cluster.cluster.brokers[page_broker].metadata.leader_for("orders", p)
                                       for p in range(3)])
        led = [p for p, leader in enumerate(leaders) if leader == victim]
        assert led, "each broker leads one partition of a 3x3 topic"
        watched = f"orders-{led[0]}"

        browser.get(f"http://127.0.0.1:{port}/")
        wait_for(lambda: _leader_cell(browser, watched), lambda leader: leader == victim, 20,
                 f"the page showing {watched} led by broker {victim}")
        wait_for(lambda: _text(browser, "#groups"), lambda text: "shipping" in text
                 and "orders:" in text, 20, "the page showing group shipping with its assignment")
        assert "controller" in _broker_row_text(browser, controller)
        _shot(browser, tmp_path, "console.png")

        cluster.kill(victim)
        new_leader = wait_for(lambda: _leader_cell(browser, watched), lambda leader: leader not in (victim, None),
                              30, f"the page showing a new leader of {watched}")
        assert new_leader in cluster.broker_ids and new_leader != victim
        wait_for(lambda: _broker_row_text(browser, victim), lambda text: "down" in text, 20,
                 f"broker {victim} shown down")
        transitions = wait_for(lambda: _text(browser, "#transitionTable"),
                               lambda text: f"{watched} replica {victim}" in text and "OfflineReplica" in text,
                               20, "the controller's replica transitions for the dead broker")
        assert "OnlinePartition" in transitions
        wait_for(lambda: _text(browser, f'tr[data-partition="{watched}"]'), lambda text: "under-replicated" in text,
                 20, f"{watched} shown under-replicated")
        _shot(browser, tmp_path, "console-broker-down.png")

        errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == [], errors
    finally:
        consumer.close()
