"""``odradek broker --schema-registry-port 0``: each broker process serves a registry; the two elect one primary,
the other forwards, and when the primary's process dies the survivor takes over with the ids intact.

Broker 1 starts only once broker 0's registry waits for a second live broker: a registry that made ``_schemas``
before its peers registered would hold it alone, and lose it with its broker."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from brokers import wait_for
from odradek.coordination.localzk import LocalZooKeeper
from odradek.ready_file import read_ready_file

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(240)]


@pytest.fixture
def two_brokers(tmp_path: Path) -> Iterator[list[tuple[subprocess.Popen[bytes], dict[str, str]]]]:
    server = LocalZooKeeper(tmp_path / "zookeeper").start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        readies = []
        for i in range(2):
            if i == 1:  # broker 0's registry is waiting for a second live broker before it makes _schemas
                wait_for(lambda: b"waiting up to" in (tmp_path / "broker-0.log").read_bytes(), 90,
                         what="broker 0's registry waiting for a second broker")
            ready = tmp_path / f"ready-{i}"
            with open(tmp_path / f"broker-{i}.log", "wb") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "odradek", "broker", "--id", str(i), "--zookeeper",
                     f"{server.hosts}/odradek", "--port", "0", "--data-dir", str(tmp_path / f"data-{i}"),
                     "--ready-file", str(ready), "--schema-registry-port", "0",
                     "--override", "group.initial.rebalance.delay.ms=0",
                     "--override", "offsets.topic.replication.factor=2",
                     "--override", "zookeeper.session.timeout.ms=6000"],
                    stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1")))
            readies.append(ready)
        for ready in readies:
            wait_for(lambda r=ready: r.exists(), 90, what="a broker's ready file")
        yield [(proc, read_ready_file(ready)) for proc, ready in zip(procs, readies, strict=True)]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(60)
        server.stop()


def test_each_broker_serves_a_registry_and_the_survivor_takes_over(
        two_brokers: list[tuple[subprocess.Popen[bytes], dict[str, str]]]) -> None:
    clients = [SchemaRegistryClient({"url": endpoints["schema.registry.url"]}) for _, endpoints in two_brokers]
    first_id = clients[0].register_schema("zk-a", Schema('"string"', "AVRO"))
    second_id = clients[1].register_schema("zk-b", Schema('"int"', "AVRO"))
    assert (first_id, second_id) == (1, 2)
    admin = AdminClient({"bootstrap.servers": two_brokers[1][1]["bootstrap.servers"]})
    assert len(admin.list_topics("_schemas", timeout=30).topics["_schemas"].partitions[0].replicas) == 2
    for client in clients:  # a write through either instance is readable from both at once
        assert client.get_subjects() == ["zk-a", "zk-b"]
    two_brokers[0][0].kill()  # broker 0 and its registry, whichever was primary
    survivor = SchemaRegistryClient({"url": two_brokers[1][1]["schema.registry.url"]})

    def register() -> int | None:
        try:
            return survivor.register_schema("zk-c", Schema('"bytes"', "AVRO"))
        except SchemaRegistryError as exc:  # until the group drops the killed primary and the ISR shrinks
            if exc.error_code not in (50001, 50002, 50003, 50004):
                raise
            return None

    assert wait_for(register, 120, what="a write through the survivor") == 3
    assert survivor.get_version("zk-a", 1).schema_id == 1
