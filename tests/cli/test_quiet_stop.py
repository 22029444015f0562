"""Stopping a whole ``odradek up`` cluster is not a failure and does not log like one; stopping one broker while
its peers run logs its controlled shutdown with Kafka's lines."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.testing import start_cluster


def _create(bootstrap: str, topics: dict[str, int]) -> None:
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    futures = admin.create_topics([NewTopic(name, 3, replication) for name, replication in topics.items()])
    for future in futures.values():
        future.result(30)


def test_a_three_broker_cluster_stopped_with_sigterm_logs_nothing_at_warning_or_above(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", ["--brokers", "3"])
    broker.start()
    try:
        # partitions on two of three brokers and on all three, and a group's offsets: what a stop used to
        # elect leaders for as the brokers left one by one
        _create(broker.bootstrap, {"two": 2, "three": 3})
        producer = opened(Producer({"bootstrap.servers": broker.bootstrap}))
        for i in range(30):
            producer.produce("two", f"m{i}".encode())
        assert producer.flush(30) == 0
        consumer = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                                    "auto.offset.reset": "earliest"}))
        consumer.subscribe(["two"])
        seen: list[bytes] = []

        def consumed() -> bool:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                seen.append(message.value())
            return len(seen) >= 30

        wait_for(consumed, 60, what="30 records consumed")
        consumer.commit(asynchronous=False)
        consumer.close()
    finally:
        assert broker.stop(timeout=60) == 0
    lines = broker.log_text().splitlines()
    assert any("broker 2 stopped" in line for line in lines)
    loud = [line for line in lines if any(f" {level} " in line for level in ("WARNING", "ERROR", "CRITICAL"))]
    assert loud == []


def test_one_broker_stopped_while_two_run_logs_its_controlled_shutdown_as_kafka_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = start_cluster(tmp_path / "data", 3)
    try:
        _create(cluster.bootstrap, {"led": 3})
        caplog.set_level(logging.INFO)
        cluster.stop(1)
        messages = [record.getMessage() for record in caplog.records]
        assert cluster.run(lambda: cluster.cluster.brokers[0].running and cluster.cluster.brokers[2].running)
    finally:
        cluster.close()
    shutdown = [m for m in messages if m.startswith("[KafkaServer id=1] ")]
    assert shutdown[0] == "[KafkaServer id=1] Starting controlled shutdown"
    assert shutdown[-1].startswith("[KafkaServer id=1] Controlled shutdown request returned successfully after ")
    assert shutdown[-1].endswith("ms")
    assert any(m.endswith(f"controlled shutdown of broker {1}") for m in messages)  # the controller's side
