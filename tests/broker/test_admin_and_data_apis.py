"""Admin and data APIs through real clients and the CLI: Kafka's error codes, configs, idempotence, timestamps."""

from __future__ import annotations

import datetime
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from kio.index import load_request_schema

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.records import encode_batch


def _admin(broker: BrokerProcess) -> AdminClient:
    return opened(AdminClient({"bootstrap.servers": broker.bootstrap}))


def _create(admin: AdminClient, *topics: NewTopic, validate_only: bool = False) -> dict[str, Exception | None]:
    futures = admin.create_topics(list(topics), validate_only=validate_only, request_timeout=20)
    out: dict[str, Exception | None] = {}
    for name, fut in futures.items():
        try:
            fut.result(30)
            out[name] = None
        except Exception as exc:
            out[name] = exc
    return out


def _code(exc: Exception | None) -> str:
    """librdkafka's name for the error code (it calls INVALID_TOPIC_EXCEPTION just TOPIC_EXCEPTION)."""
    return "OK" if exc is None else exc.args[0].name()


def test_create_topics_error_codes(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    assert _code(_create(admin, NewTopic("ok-topic", 2, 1))["ok-topic"]) == "OK"
    assert _code(_create(admin, NewTopic("ok-topic", 2, 1))["ok-topic"]) == "TOPIC_ALREADY_EXISTS"
    assert _code(_create(admin, NewTopic("a_b", 1, 1))["a_b"]) == "OK"
    assert _code(_create(admin, NewTopic("a.b", 1, 1))["a.b"]) == "TOPIC_EXCEPTION"  # collides with a_b
    assert _code(_create(admin, NewTopic("bad/name", 1, 1))["bad/name"]) == "TOPIC_EXCEPTION"
    assert _code(_create(admin, NewTopic("rf3", 1, 3))["rf3"]) == "INVALID_REPLICATION_FACTOR"
    assert _code(_create(admin, NewTopic("zero", 0, 1))["zero"]) == "INVALID_PARTITIONS"
    bad_config = NewTopic("badcfg", 1, 1, config={"retention.ms": "soon"})
    assert _code(_create(admin, bad_config)["badcfg"]) == "INVALID_CONFIG"
    unknown_config = NewTopic("unknowncfg", 1, 1, config={"no.such.config": "1"})
    assert _code(_create(admin, unknown_config)["unknowncfg"]) == "INVALID_CONFIG"
    assert _code(_create(admin, NewTopic("dry", 3, 1), validate_only=True)["dry"]) == "OK"
    assert "dry" not in admin.list_topics(timeout=10).topics
    assert "ok-topic" in admin.list_topics(timeout=10).topics


def test_describe_and_alter_topic_configs(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    assert _create(admin, NewTopic("cfg", 1, 1, config={"retention.ms": "60000"}))["cfg"] is None
    resource = ConfigResource("topic", "cfg")
    described = admin.describe_configs([resource])[resource].result(20)
    assert described["retention.ms"].value == "60000"
    assert not described["retention.ms"].is_default
    assert described["segment.bytes"].value == "1073741824"
    assert described["segment.bytes"].is_default
    alter = ConfigResource("topic", "cfg", incremental_configs=[
        __import__("confluent_kafka.admin", fromlist=["ConfigEntry"]).ConfigEntry(
            "cleanup.policy", "compact",
            incremental_operation=__import__("confluent_kafka.admin", fromlist=["x"]).AlterConfigOpType.SET,
        )
    ])
    admin.incremental_alter_configs([alter])[alter].result(20)
    described = admin.describe_configs([resource])[resource].result(20)
    assert described["cleanup.policy"].value == "compact"
    assert described["retention.ms"].value == "60000", "an incremental change keeps the other overrides"

    # as Kafka: SUBTRACT may leave a list config empty
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
    subtract = ConfigResource("topic", "cfg", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT)])
    admin.incremental_alter_configs([subtract])[subtract].result(20)
    assert admin.describe_configs([resource])[resource].result(20)["cleanup.policy"].value == ""
    append = ConfigResource("topic", "cfg", incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND)])
    admin.incremental_alter_configs([append])[append].result(20)
    assert admin.describe_configs([resource])[resource].result(20)["cleanup.policy"].value == "delete"


def test_legacy_alter_configs_replaces_the_whole_override_set(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    assert _create(admin, NewTopic("legacy", 1, 1, config={"retention.ms": "60000"}))["legacy"] is None
    resource = ConfigResource("topic", "legacy", set_config={"compression.type": "snappy",
                                                             "file.delete.delay.ms": "12345"})
    admin.alter_configs([resource])[resource].result(20)
    described = admin.describe_configs([ConfigResource("topic", "legacy")])[ConfigResource("topic", "legacy")]
    configs = described.result(20)
    assert configs["compression.type"].value == "snappy"
    assert configs["file.delete.delay.ms"].value == "12345"
    assert configs["retention.ms"].is_default, "an override the request leaves out goes back to its default"
    bad = ConfigResource("topic", "legacy", set_config={"retention.ms": "soon"})
    with pytest.raises(Exception) as info:
        admin.alter_configs([bad])[bad].result(20)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    static = ConfigResource("broker", "0", set_config={"broker.id": "7"})
    with pytest.raises(Exception) as info:
        admin.alter_configs([static])[static].result(20)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert info.value.args[0].str() == "Cannot update these configs dynamically: Set(broker.id)"


def test_create_partitions(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    assert _create(admin, NewTopic("grow", 2, 1))["grow"] is None
    admin.create_partitions([NewPartitions("grow", 5)])["grow"].result(20)
    assert len(admin.list_topics("grow", timeout=10).topics["grow"].partitions) == 5
    with pytest.raises(Exception) as info:
        admin.create_partitions([NewPartitions("grow", 3)])["grow"].result(20)
    assert info.value.args[0].name() == "INVALID_PARTITIONS"


def test_describe_cluster(broker: BrokerProcess) -> None:
    admin = _admin(broker)  # keep the handle alive until the future resolves
    cluster = admin.describe_cluster(request_timeout=10).result(20)
    assert len(cluster.nodes) == 1
    assert cluster.controller.port == int(broker.bootstrap.rsplit(":", 1)[1])
    assert cluster.cluster_id


def test_log_append_time_topics_get_broker_timestamps(broker: BrokerProcess) -> None:
    admin = _admin(broker)
    assert _create(admin, NewTopic("lat", 1, 1, config={"message.timestamp.type": "LogAppendTime"}))["lat"] is None
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap}))
    producer.produce("lat", b"v", timestamp=1_000)  # a client timestamp far in the past
    assert producer.flush(10) == 0
    consumer = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lat"}))
    consumer.assign([TopicPartition("lat", 0, 0)])
    msg = None
    for _ in range(40):
        msg = consumer.poll(0.5)
        if msg is not None:
            break
    consumer.close()
    assert msg is not None and msg.error() is None
    kind, ts = msg.timestamp()
    assert kind == 2  # TIMESTAMP_LOG_APPEND_TIME
    assert ts > 1_600_000_000_000


def _produce_raw(conn: KafkaConnection, topic: str, batch: bytes) -> object:
    cls = load_request_schema(0, 9)
    mod = sys.modules[cls.__module__]
    request = cls(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
        topic_data=(
            mod.TopicProduceData(name=topic, partition_data=(mod.PartitionProduceData(index=0, records=batch),)),
        ),
    )
    return conn.request(0, request, 9).responses[0].partition_responses[0]


def test_idempotent_retries_are_acknowledged_with_their_original_offsets(broker: BrokerProcess) -> None:
    assert _create(_admin(broker), NewTopic("idem", 1, 1))["idem"] is None
    with KafkaConnection(broker.bootstrap) as conn:
        pid_cls = load_request_schema(22, 4)
        pid = conn.request(22, pid_cls(transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                                       producer_id=-1, producer_epoch=-1), 4)
        assert pid.error_code == ErrorCode.none

        def batch(seq: int, n: int = 2) -> bytes:
            # a current timestamp: producer state expires producer.id.expiration.ms after a batch's timestamp
            now_ms = int(time.time() * 1000)
            return bytes(encode_batch([(None, b"x%d" % (seq + i), []) for i in range(n)], timestamp_ms=now_ms,
                                      producer_id=pid.producer_id, producer_epoch=pid.producer_epoch,
                                      base_sequence=seq))

        first = _produce_raw(conn, "idem", batch(0))
        second = _produce_raw(conn, "idem", batch(2))
        assert (first.error_code, first.base_offset) == (0, 0)
        assert (second.error_code, second.base_offset) == (0, 2)
        retry = _produce_raw(conn, "idem", batch(0))
        assert (retry.error_code, retry.base_offset) == (0, 0), "a retried batch keeps its original offset"
        gap = _produce_raw(conn, "idem", batch(10))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        after = _produce_raw(conn, "idem", batch(4))
        assert (after.error_code, after.base_offset) == (0, 4), "nothing from the retry or the gap was written"


def test_topics_cli_reads_like_kafka_topics(broker: BrokerProcess) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "odradek", "topics", "--bootstrap-server", broker.bootstrap, *args],
            capture_output=True, text=True, timeout=60,
        )

    created = cli("--create", "--topic", "cli-topic", "--partitions", "3", "--config", "retention.ms=120000")
    assert created.returncode == 0, created.stderr
    assert "Created topic cli-topic." in created.stdout
    again = cli("--create", "--topic", "cli-topic", "--partitions", "3")
    assert again.returncode != 0 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert "cli-topic" in cli("--list").stdout.split()
    described = cli("--describe", "--topic", "cli-topic").stdout
    assert "PartitionCount: 3" in described and "retention.ms=120000" in described
    assert described.count("\tPartition: ") == 3
    assert cli("--delete", "--topic", "cli-topic").returncode == 0
    assert "cli-topic" not in cli("--list").stdout.split()
