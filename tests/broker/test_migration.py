"""A data directory of the old single-broker mode (``topics.json``, logs directly in the data directory) is migrated
into a cluster of one on first start, records, offsets, ids and configs kept; what cannot be migrated is refused.

The old layout is made the way the old broker left it: a broker runs, takes records and a group's commits, stops
cleanly, and its directory is laid out as the single-broker mode kept it (same log files, ``topics.json`` with the
topics' ids, assignments and configs, ``producer-ids.json``), since the log format itself did not change.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.coordination import znodes as zn
from odradek.coordination.durable import DurableEmbeddedBackend

TOPIC = "kept"
GROUP = "kept-group"


async def _read_topics(coordination: Path) -> tuple[str, dict[str, dict[str, object]]]:
    backend = DurableEmbeddedBackend(coordination)
    session = await backend.session(30_000)
    cluster_id = zn.ClusterId.from_json((await session.get(zn.CLUSTER_ID))[0]).id
    topics: dict[str, dict[str, object]] = {}
    for name in await session.children(zn.TOPICS):
        assignment = zn.TopicAssignment.from_json((await session.get(zn.topic_path(name)))[0], name)
        config = zn.TopicConfig.from_json((await session.get(zn.topic_config_path(name)))[0], name)
        topics[name] = {"topic_id": assignment.topic_id,
                        "partitions": {str(p): list(r) for p, r in assignment.partitions.items()},
                        "configs": dict(config.config)}
    await backend.close()
    return cluster_id, topics


async def _lay_out_as_single_broker_mode(data_dir: Path) -> None:
    cluster_id, topics = await _read_topics(data_dir / "coordination")
    shutil.rmtree(data_dir / "coordination")
    for entry in (data_dir / "broker-0").iterdir():
        entry.rename(data_dir / entry.name)
    (data_dir / "broker-0").rmdir()
    (data_dir / "topics.json").write_text(json.dumps({"version": 1, "cluster_id": cluster_id, "topics": topics}))
    (data_dir / "producer-ids.json").write_text(json.dumps({"version": 1, "block_end": 5000}))


def _records(bootstrap: str) -> list[tuple[int, int, bytes | None]]:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "auto.offset.reset": "earliest",
                                "enable.auto.commit": False}))
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
    out: list[tuple[int, int, bytes | None]] = []
    try:
        while len(out) < 60:
            msg = consumer.poll(10)
            assert msg is not None, f"only {len(out)} records read back"
            assert msg.error() is None, msg.error()
            out.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return sorted(out)


def _committed(bootstrap: str) -> list[tuple[int, int]]:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP}))
    try:
        return [(tp.partition, tp.offset) for tp in consumer.committed([TopicPartition(TOPIC, p) for p in range(2)],
                                                                       timeout=30)]
    finally:
        consumer.close()


async def test_a_single_broker_directory_is_migrated_with_records_offsets_and_configs(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir, ["--override", "group.initial.rebalance.delay.ms=0"]).start()
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(TOPIC, 2, 1, config={"retention.ms": "123456789"})])[TOPIC].result(30)
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True}))
    for i in range(60):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    committer = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP}))
    committer.commit(offsets=[TopicPartition(TOPIC, 0, 17), TopicPartition(TOPIC, 1, 23)], asynchronous=False)
    committer.close()
    before = _records(broker.bootstrap)
    topic_id = admin.describe_topics(TopicCollection([TOPIC]))[TOPIC].result(30).topic_id
    assert broker.stop() == 0
    await _lay_out_as_single_broker_mode(data_dir)

    broker.start()
    assert "migrated single-broker data" in broker.log_text()
    assert not (data_dir / "topics.json").exists() and (data_dir / "broker-0" / "topics.json.migrated").exists()
    assert _records(broker.bootstrap) == before
    assert _committed(broker.bootstrap) == [(0, 17), (1, 23)]
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    described = admin.describe_topics(TopicCollection([TOPIC]))[TOPIC].result(30)
    assert str(described.topic_id) == str(topic_id)
    resource = ConfigResource("topic", TOPIC)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["retention.ms"].value == "123456789"
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True}))
    producer.produce(TOPIC, value=b"after", partition=0)
    assert producer.flush(30) == 0

    assert broker.stop() == 0
    broker.start()  # the second start finds a cluster of one: nothing to migrate, nothing lost
    assert broker.log_text().count("migrated single-broker data") == 1
    assert len(_records(broker.bootstrap)) == 60
    broker.stop()


def _legacy_dir(tmp_path: Path) -> Path:
    data_dir = tmp_path / "old"
    data_dir.mkdir()
    topics = {"t": {"topic_id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8", "partitions": {"0": [0]}, "configs": {}}}
    (data_dir / "topics.json").write_text(json.dumps({"version": 1, "cluster_id": "x" * 22, "topics": topics}))
    return data_dir


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=60)


def test_a_directory_led_by_another_broker_id_is_refused_with_the_way_out(tmp_path: Path) -> None:
    data_dir = _legacy_dir(tmp_path)
    result = _run("up", "--port", "0", "--data-dir", str(data_dir), "--broker-id", "3")
    assert result.returncode != 0
    assert "--broker-id 0" in result.stderr, result.stderr
    assert (data_dir / "topics.json").exists(), "a refused directory is left as it was"


def test_a_zookeeper_broker_refuses_a_single_broker_directory(tmp_path: Path) -> None:
    data_dir = _legacy_dir(tmp_path)
    result = _run("broker", "--id", "0", "--zookeeper", "127.0.0.1:1", "--port", "0", "--data-dir", str(data_dir))
    assert result.returncode != 0
    assert f"odradek up --data-dir {data_dir}" in result.stderr, result.stderr
    assert sorted(p.name for p in data_dir.iterdir()) == ["topics.json"]
