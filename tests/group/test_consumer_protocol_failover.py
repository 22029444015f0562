"""A KIP-848 group survives the failure of its coordinator in a three-broker cluster.

Two librdkafka consumers (``group.protocol=consumer``) share a replicated topic and commit what they consumed; the
broker coordinating the group is killed. The broker that takes over ``__consumer_offsets`` rebuilds the group from
its records: the same group epoch, the same members with the same assignments, the committed offsets kept, and the
consumers carry on heartbeating at their epochs without rejoining.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import wait_for
from kafka_clients import opened
from odradek.testing import ThreadedCluster

PARTITIONS, MESSAGES = 4, 40


def snapshot(c: ThreadedCluster, group: str) -> tuple[int, int, dict[str, Any]] | None:
    """(coordinator id, group epoch, member → (epoch, assigned)) from the broker coordinating ``group`` now."""

    def read() -> tuple[int, int, dict[str, Any]] | None:
        for bid, broker in c.cluster.brokers.items():
            if broker is None or not getattr(broker, "groups", None):
                continue
            coord = broker.groups
            if not coord.owns(coord.partition_for(group)):
                continue
            state = coord.consumer_groups.groups.get(group)
            if state is not None:
                return bid, state.group_epoch, {m: (x.member_epoch, x.assigned) for m, x in state.members.items()}
        return None

    return c.run(read)


def tokens(c: ThreadedCluster, group: str) -> dict[str, object]:
    """Each member's session token at the coordinator: a new one means the member heartbeated."""

    def read() -> dict[str, object]:
        for broker in c.cluster.brokers.values():
            coord = getattr(broker, "groups", None)
            if coord is not None and coord.owns(coord.partition_for(group)) and group in coord.consumer_groups.groups:
                return {m: x.session_token for m, x in coord.consumer_groups.groups[group].members.items()}
        return {}

    return c.run(read)


def test_coordinator_failover_keeps_the_group(tmp_path: Path) -> None:
    overrides = {
        "group.initial.rebalance.delay.ms": "0",
        "zookeeper.session.timeout.ms": "2000",
        "replica.lag.time.max.ms": "3000",
        "offsets.topic.num.partitions": "3",
    }
    c = ThreadedCluster(3, tmp_path / "cluster", overrides=overrides).start()
    consumers: list[Consumer] = []
    try:
        topic, group = f"fo-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        admin = opened(AdminClient({"bootstrap.servers": c.bootstrap_servers}))
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
        producer = opened(Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"}))
        for i in range(MESSAGES):
            producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        consumers = [
            opened(Consumer(
                {
                    "bootstrap.servers": c.bootstrap_servers,
                    "group.id": group,
                    "group.protocol": "consumer",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                }
            ))
            for _ in range(2)
        ]
        for consumer in consumers:
            consumer.subscribe([topic])

        def caught_up(consumer: Consumer) -> bool:
            """Two partitions, each read to its end by this consumer: a member whose partitions the other one had
            read before the group balanced has stored no offset yet, and its commit would fail with _NO_OFFSET."""
            parts = consumer.assignment()
            return len(parts) == 2 and all(tp.offset == MESSAGES // PARTITIONS for tp in consumer.position(parts))

        deadline = time.monotonic() + 60
        while not all(caught_up(x) for x in consumers):
            assert time.monotonic() < deadline, [x.position(x.assignment()) for x in consumers]
            for consumer in consumers:
                consumer.poll(0.05)
        for consumer in consumers:
            consumer.commit(asynchronous=False)
        committed = {(tp.partition, tp.offset) for x in consumers for tp in x.committed(x.assignment(), 30)}
        assert sum(offset for _, offset in committed) == MESSAGES

        def stable() -> tuple[int, int, dict[str, Any]] | None:
            snap = snapshot(c, group)
            return snap if snap and all(e == snap[1] for e, _ in snap[2].values()) else None

        before = wait_for(stable, 30, what="a stable group")
        assert isinstance(before, tuple)
        coordinator, epoch, members = before
        c.kill(coordinator)

        def taken_over() -> tuple[int, int, dict[str, Any]] | None:
            for consumer in consumers:
                consumer.poll(0.05)
            snap = snapshot(c, group)
            return snap if snap and snap[0] != coordinator else None

        after = wait_for(taken_over, 60, what="another broker coordinating the group")
        assert isinstance(after, tuple)
        assert after[1:] == (epoch, members)
        # The consumers heartbeat to the new coordinator at their epochs: nobody rejoins, the epoch stays.
        first_tokens = tokens(c, group)

        def everyone_heartbeated() -> bool:
            for consumer in consumers:
                consumer.poll(0.05)
            now = tokens(c, group)
            return all(now.get(m) is not t for m, t in first_tokens.items())

        wait_for(everyone_heartbeated, 30, what="both members heartbeating to the new coordinator")
        assert snapshot(c, group) == after
        assert {(tp.partition, tp.offset) for x in consumers for tp in x.committed(x.assignment(), 30)} == committed
    finally:
        for consumer in consumers:
            consumer.close()
        c.close()
