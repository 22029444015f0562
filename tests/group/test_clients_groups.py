"""Issue 2's acceptance for consumer groups, with four real clients against a real odradek broker.

For each client: create a topic with 3 partitions, produce 10,000 keyed messages with acks=all, consume part of them
in a consumer group and commit exactly what was consumed, stop, start a new consumer in the same group and consume
the rest. Together the two runs must hold every message exactly once, each partition in offset order and each key's
values in the order they were produced. Then the committed offsets are the partitions' ends, and the topic is listed
and deleted. kcat runs as its balanced consumer (``-G``).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest

from brokers import BrokerProcess, wait_for
from kafka_clients import opened

MESSAGES = 10_000
PARTITIONS = 3
FIRST_RUN = 4_000
KEYS = 97
DEADLINE_S = 60.0

Seen = list[tuple[int, int, str, str]]
"""(partition, offset, key, value) in the order one consumer run received them."""


def keyed_messages() -> list[tuple[str, str]]:
    return [(f"key-{i % KEYS}", str(i)) for i in range(MESSAGES)]


def check_exactly_once_in_order(first: Seen, second: Seen) -> dict[int, int]:
    """Both runs together: every message once, per-partition offsets contiguous from 0, per-key values in order."""
    assert len(first) == FIRST_RUN, f"first run consumed {len(first)}"
    ends: dict[int, int] = {}
    for run in (first, second):
        last: dict[int, int] = {}
        for partition, offset, _, _ in run:
            assert offset > last.get(partition, -1), f"partition {partition} went back to offset {offset}"
            last[partition] = offset
    by_partition: dict[int, list[int]] = defaultdict(list)
    by_key: dict[str, list[int]] = defaultdict(list)
    partition_of_key: dict[str, int] = {}
    for partition, offset, key, value in first + second:
        by_partition[partition].append(offset)
        by_key[key].append(int(value))
        assert partition_of_key.setdefault(key, partition) == partition, f"{key} in two partitions"
    for partition, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {partition}: skipped or repeated offsets"
        ends[partition] = len(offsets)
    assert sum(ends.values()) == MESSAGES
    assert sorted(v for values in by_key.values() for v in values) == list(range(MESSAGES))
    for key, values in by_key.items():
        assert values == sorted(values), f"{key}: values out of produce order"
    return ends


def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"orders-{suffix}", f"group-{suffix}"


# --- confluent-kafka -------------------------------------------------------------------------------------------


def test_confluent_kafka(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = names()
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5}))
    failures: list[Any] = []

    def on_delivery(error: Any, _msg: Any) -> None:
        if error is not None:
            failures.append(error)

    for key, value in keyed_messages():
        while True:
            try:
                producer.produce(topic, value.encode(), key.encode(), on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(30) == 0 and not failures

    def consume(limit: int | None) -> Seen:
        consumer = opened(Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        ))
        consumer.subscribe([topic])
        seen: Seen = []
        deadline = time.monotonic() + DEADLINE_S
        target = limit if limit is not None else MESSAGES - FIRST_RUN
        while len(seen) < target and time.monotonic() < deadline:
            msg: Any = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            seen.append((msg.partition(), msg.offset(), msg.key().decode(), msg.value().decode()))
        last: dict[int, int] = {}
        for partition, offset, _, _ in seen:
            last[partition] = offset
        if last:
            consumer.commit(offsets=[TopicPartition(topic, p, o + 1) for p, o in last.items()], asynchronous=False)
        consumer.close()
        return seen

    first = consume(FIRST_RUN)
    second = consume(None)
    ends = check_exactly_once_in_order(first, second)

    checker = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group}))
    committed = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    checker.close()
    assert {tp.partition: tp.offset for tp in committed} == {p: ends.get(p, -1001) for p in range(PARTITIONS)}

    assert topic in admin.list_topics(timeout=30).topics
    admin.delete_topics([topic])[topic].result(30)
    wait_for(lambda: topic not in admin.list_topics(timeout=30).topics, 30, what="topic deleted")


# --- kafka-python ------------------------------------------------------------------------------------------------


def test_kafka_python(broker: BrokerProcess) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.structs import OffsetAndMetadata

    topic, group = names()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    futures = [producer.send(topic, key=k.encode(), value=v.encode()) for k, v in keyed_messages()]
    producer.flush(30)
    for f in futures:
        f.get(30)
    producer.close()

    def consume(limit: int) -> Seen:
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            max_poll_records=500,
        )
        seen: Seen = []
        deadline = time.monotonic() + DEADLINE_S
        while len(seen) < limit and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                for r in records:
                    seen.append((tp.partition, r.offset, r.key.decode(), r.value.decode()))
        # Keep exactly ``limit``: what is dropped here was never handed to the application, so it is not committed.
        seen = seen[:limit]
        last: dict[int, int] = {}
        for partition, offset, _, _ in seen:
            last[partition] = offset
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o + 1, "", -1) for p, o in last.items()})
        consumer.close(autocommit=False)
        return seen

    first = consume(FIRST_RUN)
    second = consume(MESSAGES - FIRST_RUN)
    ends = check_exactly_once_in_order(first, second)

    committed = admin.list_group_offsets(group)[group]  # OffsetFetch v8: groups batched
    assert {tp.partition: om.offset for tp, om in committed.items() if tp.topic == topic} == ends
    assert group in {g["group_id"] for g in admin.list_groups()}

    assert topic in admin.list_topics()
    admin.delete_topics([topic])
    wait_for(lambda: topic not in admin.list_topics(), 30, what="topic deleted")
    admin.close()


# --- aiokafka ------------------------------------------------------------------------------------------------


async def test_aiokafka(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic, group = names()

    async def consume(limit: int) -> Seen:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        seen: Seen = []
        try:
            deadline = time.monotonic() + DEADLINE_S
            while len(seen) < limit and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500, max_records=limit - len(seen))
                for tp, records in batches.items():
                    for r in records:
                        seen.append((tp.partition, r.offset, r.key.decode(), r.value.decode()))
            last: dict[int, int] = {}
            for partition, offset, _, _ in seen:
                last[partition] = offset
            await consumer.commit({TopicPartition(topic, p): o + 1 for p, o in last.items()})
        finally:
            await consumer.stop()
        return seen

    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            sends = [await producer.send(topic, v.encode(), key=k.encode()) for k, v in keyed_messages()]
            await asyncio.gather(*sends)
        finally:
            await producer.stop()

        first = await consume(FIRST_RUN)
        second = await consume(MESSAGES - FIRST_RUN)
        ends = check_exactly_once_in_order(first, second)

        committed = await admin.list_consumer_group_offsets(group)
        assert {tp.partition: om.offset for tp, om in committed.items() if tp.topic == topic} == ends

        assert topic in await admin.list_topics()
        await admin.delete_topics([topic])
        for _ in range(60):
            if topic not in await admin.list_topics():
                break
            await asyncio.sleep(0.5)
        assert topic not in await admin.list_topics()
    finally:
        await admin.close()


# --- kcat ------------------------------------------------------------------------------------------------------

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def test_kcat_balanced_consumer(broker: BrokerProcess) -> None:
    """kcat (Debian's, librdkafka 2.0.2) produces and consumes; topics are created and deleted by AdminClient."""
    from confluent_kafka.admin import AdminClient, NewTopic

    assert KCAT is not None, "kcat is a test dependency (Debian package kafkacat)"
    topic, group = names()
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

    lines = "".join(f"{k}:{v}\n" for k, v in keyed_messages())
    produced = subprocess.run(
        [KCAT, "-b", broker.bootstrap, "-P", "-t", topic, "-K", ":", "-X", "acks=all"],
        input=lines.encode(),
        capture_output=True,
        timeout=DEADLINE_S,
    )
    assert produced.returncode == 0, produced.stderr.decode()

    def consume(count: int) -> Seen:
        out = subprocess.run(
            [
                KCAT,
                "-b",
                broker.bootstrap,
                "-G",
                group,
                topic,
                "-c",
                str(count),
                "-f",
                "%p %o %k %s\\n",
                "-u",
                "-X",
                "auto.offset.reset=earliest",
            ],
            capture_output=True,
            timeout=DEADLINE_S,
        )
        assert out.returncode == 0, out.stderr.decode()
        seen: Seen = []
        for line in out.stdout.decode().splitlines():
            partition, offset, key, value = line.split(" ")
            seen.append((int(partition), int(offset), key, value))
        assert len(seen) == count, out.stderr.decode()
        return seen

    first = consume(FIRST_RUN)
    second = consume(MESSAGES - FIRST_RUN)
    ends = check_exactly_once_in_order(first, second)

    from confluent_kafka import Consumer, TopicPartition

    checker = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group}))
    committed = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    checker.close()
    assert {tp.partition: tp.offset for tp in committed} == ends

    listing = subprocess.run([KCAT, "-b", broker.bootstrap, "-L", "-J"], capture_output=True, timeout=30)
    assert listing.returncode == 0
    assert topic in {t["topic"] for t in json.loads(listing.stdout)["topics"]}
    admin.delete_topics([topic])[topic].result(30)
    wait_for(lambda: topic not in admin.list_topics(timeout=30).topics, 30, what="topic deleted")


def test_group_is_listed_described_and_deleted(broker: BrokerProcess) -> None:
    """The admin view of a group: listed while it exists, described with its member, deleted once empty."""
    from confluent_kafka import Consumer, ConsumerGroupState, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = names()
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    consumer = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": "describer"}))
    consumer.subscribe([topic])
    wait_for(lambda: consumer.poll(0.2) is None and consumer.assignment(), 30, what="assignment")

    listed = admin.list_consumer_groups().result(30)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert described.state == ConsumerGroupState.STABLE
    assert [m.client_id for m in described.members] == ["describer"]
    assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == set(range(PARTITIONS))
    with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
        admin.delete_consumer_groups([group])[group].result(30)

    consumer.close()
    admin.delete_consumer_groups([group])[group].result(30)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(30).valid}
