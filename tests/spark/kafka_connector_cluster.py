"""Helpers for the tests of Spark's own Kafka connector (``format("kafka")``) on a three-broker odradek cluster:
replicated topics, records with chosen timestamps or inside transactions, and a leader killed while work goes on."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from spark_brokers import wait_for

from kafka_clients import opened
from odradek.testing import ThreadedCluster

QUERY_TIMEOUT_S = 240


def prefix() -> str:
    """A fresh topic-name prefix, so this module's topics (and its subscribePattern) meet no other test's."""
    return f"kc{uuid.uuid4().hex[:8]}-"


def create_topics(cluster: ThreadedCluster, partitions: dict[str, int]) -> None:
    """Topics with replication factor 3 and min.insync.replicas 2, so one broker may die without losing a write."""
    admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap_servers}))
    new = [NewTopic(t, n, 3, config={"min.insync.replicas": "2"}) for t, n in partitions.items()]
    for future in admin.create_topics(new, request_timeout=60).values():
        future.result()
    wait_for(lambda: all(_leaders(admin, t).keys() == set(range(n)) for t, n in partitions.items()),
             what="every partition to have a leader")


def _leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    md = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
    if md is None or md.error is not None:
        return {}
    return {p: m.leader for p, m in md.partitions.items() if m.leader >= 0}


@contextlib.contextmanager
def leader_killed(cluster: ThreadedCluster, topic: str, partition: int) -> Iterator[int]:
    """Kill the broker leading ``topic-partition``, wait until another broker leads it, and start the victim again
    on leaving, so the module's later tests find three brokers; yields the victim's id."""
    admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap_servers}))
    victim = _leaders(admin, topic)[partition]
    cluster.kill(victim)
    try:
        wait_for(lambda: _leaders(admin, topic).get(partition, victim) != victim,
                 what=f"{topic}-{partition} to get a leader other than broker {victim}")
        yield victim
    finally:
        cluster.start_broker(victim)


def produce(cluster: ThreadedCluster, topic: str, records: Iterable[dict]) -> None:
    """Each dict's value, key, partition, timestamp and headers; acks=all and idempotent, fails on any error."""
    producer = opened(Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True,
                                "linger.ms": 5}))
    errors: list[object] = []
    for r in records:
        producer.produce(topic, on_delivery=lambda err, _m: errors.append(err) if err else None, **r)
    assert producer.flush(60) == 0
    assert not errors, errors


def transactions(cluster: ThreadedCluster, topic: str, batches: list[tuple[list[bytes], bool]]) -> None:
    """One transaction per (values, commit?) in order, by one transactional producer, round-robin over partitions."""
    producer = opened(Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5,
                                "transactional.id": f"kc-{uuid.uuid4().hex[:8]}"}))
    producer.init_transactions(60)
    for values, commit in batches:
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v)
        producer.flush(60)
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
