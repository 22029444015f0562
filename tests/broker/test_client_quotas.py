"""Client quotas (KIP-546 admin, KIP-219 throttling) against a broker process, driven by librdkafka.

The rate assertions are correctness bounds, not speed measurements: a client held to a quota of Q bytes/s may take,
by elapsed time T, at most Q * T (with a 10% margin) plus the burst Kafka's windowed rate lets a fresh client take
at once, ``(quota.window.num - 1) * quota.window.size.seconds`` of quota, plus one request. Without enforcement a
local producer or consumer moves tens of megabytes a second, far past the bound; a slow, loaded machine only stays
further below it. The brokers here use 3 windows of 1 s, so the burst is 2 s of quota and a few seconds suffice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ThrottleEvent
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek import admin
from odradek.client import KafkaConnection
from odradek.coordination.localzk import LocalZooKeeper
from odradek.errors import ErrorCode, KafkaError

QUOTA = 100_000  # bytes per second
WINDOWS, WINDOW_S = 3, 1
BURST = QUOTA * (WINDOWS - 1) * WINDOW_S
RUN_S = 4.0
VALUE = b"x" * 1000


@pytest.fixture
def quota_broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory("--override", f"quota.window.num={WINDOWS}",
                          "--override", f"quota.window.size.seconds={WINDOW_S}")


def _topic(bootstrap: str, name: str) -> str:
    client = opened(AdminClient({"bootstrap.servers": bootstrap}))
    client.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def _alter(bootstrap: str, entity: admin.QuotaEntityParts, changes: dict[str, float | None]) -> None:
    with KafkaConnection(bootstrap) as conn:
        assert admin.alter_client_quotas(conn, entity, changes) == (ErrorCode.none, None)


def _applied(broker: BrokerProcess, entity_path: str, marker: str) -> Callable[[], bool]:
    """The broker's log line that a change notification for the entity was applied (what a restart would do)."""
    return lambda: any(entity_path in line and marker in line for line in broker.log_text().splitlines()
                       if "client quotas of" in line)


def _produce_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> tuple[int, float, list[float]]:
    """Produce as fast as the broker takes it for ``seconds``; the bytes acknowledged by then, the time that took,
    and the throttle times librdkafka reported."""
    throttles: list[float] = []
    acked = [0]

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[0] += len(msg.value())

    def throttled(event: ThrottleEvent) -> None:
        throttles.append(event.throttle_time)

    producer = opened(Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1, "linger.ms": 5,
                                "batch.size": 16_384, "throttle_cb": throttled}))
    start = time.monotonic()
    while (elapsed := time.monotonic() - start) < seconds:
        if len(producer) < 200:
            producer.produce(topic, VALUE, on_delivery=delivered)
        producer.poll(0.001 if len(producer) >= 200 else 0)
    done = acked[0]
    producer.flush(30)
    producer.poll(0)
    return done, elapsed, throttles


def test_a_throttled_producer_is_held_to_its_quota(quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap
    topic = _topic(bootstrap, "produced")
    _alter(bootstrap, [("client-id", "slow-producer")], {"producer_byte_rate": QUOTA})
    wait_for(_applied(quota_broker, "clients/slow-producer", "producer_byte_rate"), 30, what="quota applied")

    acked, elapsed, throttles = _produce_for(bootstrap, topic, "slow-producer", RUN_S)
    assert acked > 0
    assert acked <= QUOTA * elapsed * 1.1 + BURST + 20_000, f"{acked} bytes in {elapsed:.2f} s"
    assert throttles and max(throttles) > 0, "librdkafka saw no throttle_time_ms"

    # Raised without a restart: the change notification reaches the broker, and the same client id runs free.
    _alter(bootstrap, [("client-id", "slow-producer")], {"producer_byte_rate": 1_000_000_000})
    wait_for(_applied(quota_broker, "clients/slow-producer", "1000000000"), 30, what="raised quota applied")
    acked, elapsed, throttles = _produce_for(bootstrap, topic, "slow-producer", 1.0)
    assert acked > 0
    assert not throttles


def test_a_throttled_consumer_is_held_to_its_quota(quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap
    topic = _topic(bootstrap, "consumed")
    need = int(QUOTA * RUN_S * 1.1 + BURST) * 2
    # Batches well below what the quota allows in a window: a fetch always returns at least one whole batch
    # (KIP-74), and one larger than the window's allowance would be throttled every time, in Kafka too.
    producer = opened(Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 16_384}))
    for _ in range(need // len(VALUE)):
        producer.produce(topic, VALUE)
        producer.poll(0)
    assert producer.flush(60) == 0

    # The default client-id quota: the consumer's own id has no entity of its own.
    _alter(bootstrap, [("client-id", None)], {"consumer_byte_rate": QUOTA})
    wait_for(_applied(quota_broker, "clients/<default>", "consumer_byte_rate"), 30, what="quota applied")

    throttles: list[float] = []
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                                "client.id": "slow-consumer",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                "throttle_cb": lambda e: throttles.append(e.throttle_time)}))
    try:
        consumer.subscribe([topic])
        got = 0
        start: float | None = None
        elapsed = 0.0
        give_up = time.monotonic() + 60
        while start is None or (elapsed := time.monotonic() - start) < RUN_S:
            assert time.monotonic() < give_up, "no record reached the consumer"
            msg = consumer.poll(0.1)
            if msg is None or msg.error():
                continue  # before the first record: still joining the group (the clock starts with it)
            if start is None:
                start = time.monotonic()
            got += len(msg.value())
        assert got <= QUOTA * elapsed * 1.1 + BURST + 20_000, f"{got} bytes in {elapsed:.2f} s"
        assert got < need, "the consumer read everything: nothing held it back"
        assert throttles and max(throttles) > 0, "librdkafka saw no throttle_time_ms"
    finally:
        consumer.close()


def test_alter_and_describe_client_quotas(quota_broker: BrokerProcess) -> None:
    """KIP-546 through raw requests (neither confluent-kafka nor kafka-python has the API): the znodes are Kafka's,
    a user's other keys survive, and bad requests get Kafka's errors."""
    bootstrap = quota_broker.bootstrap
    with KafkaConnection(bootstrap) as conn:
        ok = (ErrorCode.none, None)
        assert admin.alter_client_quotas(conn, [("user", "alice")], {"producer_byte_rate": 1024}) == ok
        assert admin.alter_client_quotas(conn, [("user", "alice"), ("client-id", "app 1")],
                                         {"consumer_byte_rate": 2048, "request_percentage": 25}) == ok
        assert admin.alter_client_quotas(conn, [("client-id", None)], {"producer_byte_rate": 512}) == ok
        assert admin.alter_client_quotas(conn, [("user", "bob")], {"producer_byte_rate": 9}, validate_only=True) == ok

        everything = admin.describe_client_quotas(conn, [])
        assert everything == [
            ([("client-id", None)], {"producer_byte_rate": 512.0}),
            ([("user", "alice")], {"producer_byte_rate": 1024.0}),
            ([("user", "alice"), ("client-id", "app 1")], {"consumer_byte_rate": 2048.0, "request_percentage": 25.0}),
        ]
        assert admin.describe_client_quotas(conn, [("user", 0, "alice")], strict=True) == [everything[1]]
        assert admin.describe_client_quotas(conn, [("user", 2, None)]) == everything[1:]
        assert admin.describe_client_quotas(conn, [("client-id", 1, None)]) == [everything[0]]
        assert admin.describe_client_quotas(conn, [("user", 0, "bob")]) == []  # validate_only wrote nothing

        refused = [
            ([("user", "alice")], {"SCRAM-SHA-256": 1.0}, "Invalid configuration key SCRAM-SHA-256"),
            ([("user", "alice")], {"producer_byte_rate": 1.5}, "Configuration producer_byte_rate must be a LONG value"),
            ([("group", "g")], {"producer_byte_rate": 1.0}, "Unhandled client quota entity type: group"),
            ([("user", "")], {"producer_byte_rate": 1.0}, "Empty user not supported"),
            ([], {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
        ]
        for entity, changes, message in refused:
            assert admin.alter_client_quotas(conn, entity, changes) == (ErrorCode.invalid_request, message)
        with pytest.raises(KafkaError) as info:
            admin.describe_client_quotas(conn, [("user", 0, "a"), ("user", 0, "b")])
        assert info.value.code == ErrorCode.invalid_request
        with pytest.raises(KafkaError) as info:
            admin.describe_client_quotas(conn, [("group", 2, None)])
        assert info.value.code == ErrorCode.unsupported_version

        # Removing the last quota of an entity deletes its znode (Kafka's tryCleanQuotaNodes).
        assert admin.alter_client_quotas(conn, [("client-id", None)], {"producer_byte_rate": None}) == ok
        assert admin.describe_client_quotas(conn, [("client-id", 1, None)]) == []


@pytest.mark.zookeeper
def test_user_znode_keeps_keys_it_does_not_own(tmp_path: Path) -> None:
    """On a real ZooKeeper: ``/config/users/<user>`` is shared with SCRAM credentials, which a quota change reads
    and writes back untouched; Kafka's JSON, ``<default>`` names and change notifications."""
    scram = "salt=c2FsdA==,stored_key=a,server_key=b,iterations=4096"
    with LocalZooKeeper(tmp_path / "zk").start() as zk:
        kz = KazooClient(hosts=zk.hosts)
        kz.start()
        ready = tmp_path / "ready"
        proc = None
        try:
            kz.create("/odradek/config/users/alice",
                      json.dumps({"version": 1, "config": {"SCRAM-SHA-256": scram}}).encode(), makepath=True)
            with open(tmp_path / "broker.log", "wb") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "odradek", "broker", "--id", "0", "--zookeeper", f"{zk.hosts}/odradek",
                     "--port", "0", "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready)],
                    stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
            wait_for(lambda: ready.exists() and ready.read_text().strip(), 60, what="broker ready")
            bootstrap = ready.read_text().strip().split("=", 1)[1]
            _alter(bootstrap, [("user", "alice")], {"producer_byte_rate": 1024})
            _alter(bootstrap, [("user", "alice"), ("client-id", None)], {"consumer_byte_rate": 2048})
            _alter(bootstrap, [("client-id", "a*b")], {"request_percentage": 12.5})

            assert json.loads(kz.get("/odradek/config/users/alice")[0]) == {
                "version": 1, "config": {"SCRAM-SHA-256": scram, "producer_byte_rate": "1024"}}
            assert json.loads(kz.get("/odradek/config/users/alice/clients/<default>")[0]) == {
                "version": 1, "config": {"consumer_byte_rate": "2048"}}
            assert json.loads(kz.get("/odradek/config/clients/a%2Ab")[0]) == {
                "version": 1, "config": {"request_percentage": "12.5"}}
            notes = [json.loads(kz.get(f"/odradek/config/changes/{n}")[0])
                     for n in kz.get_children("/odradek/config/changes")]
            for path in ("users/alice", "users/alice/clients/<default>", "clients/a%2Ab"):
                assert {"version": 2, "entity_path": path} in notes

            # The last quota of the user goes; the credential (and so the znode) stays.
            _alter(bootstrap, [("user", "alice")], {"producer_byte_rate": None})
            assert json.loads(kz.get("/odradek/config/users/alice")[0]) == {
                "version": 1, "config": {"SCRAM-SHA-256": scram}}
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(60)
            kz.stop()
