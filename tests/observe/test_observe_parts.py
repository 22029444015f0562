"""The pieces under the metrics and the console: the transition ring, the state tables' hook, the assignment
decoder, the histogram, the HTTP server's answers to bad requests, and ``odradek up --metrics-port``."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from scrape import scrape, value, wait_for

from odradek.broker.stats import Histogram
from odradek.controller.context import PartitionReplica, TopicPartition
from odradek.controller.states import PARTITION_VALID_PREVIOUS, PartitionState, StateTable
from odradek.controller.transitions import TransitionLog
from odradek.observe.view import decode_assignment
from odradek.ready_file import read_ready_file
from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster

P = PartitionState


def test_the_ring_keeps_the_newest_and_formats_on_read() -> None:
    ring = TransitionLog(controller_id=4, capacity=3)
    for i in range(5):
        ring.record(1000 + i, 7, "Partition", TopicPartition("t", i), P.NEW, P.ONLINE)
    ring.record(2000, 7, "Replica", PartitionReplica("__consumer_offsets", 1, 2), P.ONLINE, P.OFFLINE)
    recent = ring.recent()
    assert [t.subject for t in recent] == ["t-3", "t-4", "__consumer_offsets-1 replica 2"]
    assert (recent[0].source, recent[0].target, recent[0].controller, recent[0].epoch) == \
        ("NewPartition", "OnlinePartition", 4, 7)
    assert [t.subject for t in ring.recent(internal=False)] == ["t-3", "t-4"]
    assert [t.seq for t in ring.recent(limit=1)] == [6]


def test_state_tables_tell_of_transitions_but_not_of_loading() -> None:
    table: StateTable[TopicPartition, PartitionState] = StateTable("Partition", PARTITION_VALID_PREVIOUS,
                                                                   P.NON_EXISTENT)
    seen: list[tuple[str, str, str]] = []
    table.on_change = lambda key, old, new: seen.append((str(key.partition), old.value, new.value))
    table.load(TopicPartition("t", 0), P.ONLINE)
    table.put(TopicPartition("t", 1), P.NEW)
    table.put(TopicPartition("t", 0), P.OFFLINE)
    table.remove(TopicPartition("t", 0))
    table.remove(TopicPartition("t", 9))  # not there: nothing changed
    assert seen == [("1", "NonExistentPartition", "NewPartition"), ("0", "OnlinePartition", "OfflinePartition"),
                    ("0", "OfflinePartition", "NonExistentPartition")]


def _assignment(topics: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for topic, parts in topics.items():
        name = topic.encode()
        out += struct.pack(">h", len(name)) + name + struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return out + struct.pack(">i", -1)  # null user data


def test_member_assignments_decode_and_garbage_is_no_assignment() -> None:
    assert decode_assignment(_assignment({"orders": [0, 2], "clicks": [1]})) == [["orders", [0, 2]],
                                                                                  ["clicks", [1]]]
    assert decode_assignment(b"") == []
    assert decode_assignment(b"\x00\x00\x00\x00\x00\x05\x00") == []


def test_histogram_buckets_are_cumulative() -> None:
    h = Histogram((1.0, 10.0))
    for v in (0.5, 1.0, 3.0, 50.0):
        h.observe(v)
    assert h.cumulative() == [("1.0", 2.0), ("10.0", 3.0), ("+Inf", 4.0)]
    assert (h.count, h.sum) == (4, 54.5)


@pytest.fixture
def one_broker(tmp_path: Path) -> Iterator[ThreadedCluster]:
    cluster = ThreadedCluster(1, tmp_path / "c", overrides=dict(FAST_TEST_OVERRIDES), metrics_ports=[0])
    try:
        yield cluster.start()
    finally:
        cluster.close()


def _raw(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_bad_http_requests_get_an_error_status_and_the_server_keeps_serving(one_broker: ThreadedCluster) -> None:
    port = one_broker.run(lambda: one_broker.cluster.brokers[0].metrics_port)
    assert _raw(port, b"\x00\x01garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert _raw(port, b"GET /metrics\r\n\r\n").startswith(b"HTTP/1.1 400 ")  # no HTTP version
    assert _raw(port, b"GET /x" + b"x" * 20000 + b" HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert _raw(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    assert _raw(port, b"GET /nope HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 404 ")
    head = _raw(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")
    assert _raw(port, b"\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    samples = scrape(f"http://127.0.0.1:{port}/metrics")
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1.0
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/html") and b"<script>" in response.read()


def test_odradek_up_lists_each_brokers_metrics_endpoint_in_its_ready_file(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "up", "--brokers", "2", "--port", "0", "--metrics-port", "0",
         "--schema-registry-port", "none", "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready),
         "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        wait_for(ready.exists, lambda exists: exists, 60, "the ready file")
        endpoints = read_ready_file(ready)
        assert list(endpoints) == ["bootstrap.servers", "metrics"]  # one endpoint per line
        assert len(endpoints["bootstrap.servers"].split(",")) == 2
        urls = endpoints["metrics"].split(",")
        assert len(urls) == 2 and all(u.startswith("http://127.0.0.1:") and u.endswith("/metrics") for u in urls)
        actives = sorted(value(scrape(u), "kafka_controller_kafkacontroller_activecontrollercount") for u in urls)
        assert actives == [0.0, 1.0]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0


def test_a_paused_broker_answers_no_scrape_until_resumed(one_broker: ThreadedCluster) -> None:
    port = one_broker.run(lambda: one_broker.cluster.brokers[0].metrics_port)
    one_broker.pause(0)
    try:
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=0.5)
    finally:
        one_broker.resume(0)
    assert (b"kafka_server_replicamanager_partitioncount" in
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read())
