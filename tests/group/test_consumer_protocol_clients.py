"""KIP-848 consumer groups with librdkafka (confluent-kafka ``group.protocol=consumer``) against a real broker.

Assignments must be the ``uniform`` assignor's for the members the broker reports; a member leaving hands its
partitions to the others; a regex subscription picks up a topic created later; committed offsets survive a broker
restart along with the group.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupType
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.broker.group.server_assignors import AssignmentSpec, uniform

PARTITIONS = 6


def consumer(broker: BrokerProcess, group: str, **extra: Any) -> Consumer:
    return opened(Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **extra,
        }
    ))


def poll_until(consumers: list[Consumer], predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        for c in consumers:
            c.poll(0.05)


def owned(c: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def describe(admin: AdminClient, group: str) -> Any:
    return admin.describe_consumer_groups([group])[group].result(30)


def test_assignments_match_uniform_and_leave_hands_over(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(
        "--override", "group.initial.rebalance.delay.ms=0", "--override", "group.consumer.heartbeat.interval.ms=500"
    )
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    consumers = [consumer(broker, group) for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe([topic])
        everything = {(topic, p) for p in range(PARTITIONS)}

        def balanced() -> bool:
            sets = [owned(c) for c in consumers]
            return all(len(s) == 2 for s in sets) and set().union(*sets) == everything

        poll_until(consumers, balanced)
        desc = describe(admin, group)
        by_member = {
            m.member_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} for m in desc.members
        }
        # The broker reached this assignment through members joining one by one; the uniform assignor, given it
        # as the previous assignment, must keep it unchanged (balanced and sticky), and the targets must equal it.
        previous = {m: {topic: frozenset(p for _, p in parts)} for m, parts in by_member.items()}
        expected = uniform(AssignmentSpec({m: frozenset({topic}) for m in by_member}, {topic: PARTITIONS}, previous))
        assert expected == previous
        targets = {
            m.member_id: {(tp.topic, tp.partition) for tp in m.target_assignment.topic_partitions} for m in desc.members
        }
        assert targets == by_member
        # ListGroups (v5) reports the group's type; the type filter selects it.
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30).valid
        # (librdkafka 2.16 reports such a listing's state as UNKNOWN although the broker answers "Stable".)
        assert [(g.group_id, g.type) for g in listed if g.group_id == group] == [(group, ConsumerGroupType.CONSUMER)]
        classic_only = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30).valid
        assert group not in {g.group_id for g in classic_only}
        assert sorted(map(sorted, by_member.values())) == sorted(sorted(owned(c)) for c in consumers)

        leaving = consumers.pop()
        leaving.close()
        poll_until(
            consumers,
            lambda: (
                set().union(*(owned(c) for c in consumers)) == everything and all(len(owned(c)) == 3 for c in consumers)
            ),
        )
    finally:
        for c in consumers:
            c.close()


def test_regex_subscription_picks_up_a_new_topic(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(
        "--override", "group.initial.rebalance.delay.ms=0", "--override", "group.consumer.heartbeat.interval.ms=500"
    )
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    prefix, group = f"rx{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:8]}"
    first, later = f"{prefix}-a", f"{prefix}-b"
    admin.create_topics([NewTopic(first, 2, 1)])[first].result(30)
    c = consumer(broker, group, **{"topic.metadata.refresh.interval.ms": 1000})
    try:
        c.subscribe([f"^{prefix}-.*"])
        poll_until([c], lambda: owned(c) == {(first, 0), (first, 1)})
        admin.create_topics([NewTopic(later, 1, 1)])[later].result(30)
        poll_until([c], lambda: owned(c) == {(first, 0), (first, 1), (later, 0)})
    finally:
        c.close()
