"""Rebalances with real clients: members joining, leaving, and one crashing until its session expires."""

from __future__ import annotations

import shutil
import signal
import subprocess
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess, wait_for
from kafka_clients import opened

PARTITIONS = 6
SESSION_MS = 3_000
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def assignments(admin: AdminClient, group: str) -> dict[str, set[int]]:
    """client.id → partitions, from DescribeGroups (the broker's view of the leader's assignment)."""
    described = admin.describe_consumer_groups([group])[group].result(30)
    if described.state.name != "STABLE":
        return {}
    return {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in described.members}


def settled(admin: AdminClient, group: str, clients: set[str]) -> dict[str, set[int]] | None:
    """The group's assignment once it is Stable with exactly ``clients``, partitions split without overlap."""
    current = assignments(admin, group)
    if set(current) != clients:
        return None
    owned = [p for parts in current.values() for p in parts]
    assert len(owned) == len(set(owned)), f"a partition assigned twice: {current}"
    return current if set(owned) == set(range(PARTITIONS)) else None


def test_join_leave_and_session_expiry(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(
        "--override", "group.initial.rebalance.delay.ms=0", "--override", "group.min.session.timeout.ms=1000"
    )
    topic, group = f"rb-{uuid.uuid4().hex[:6]}", f"rb-{uuid.uuid4().hex[:6]}"
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)

    def member(name: str) -> Consumer:
        c = opened(Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "client.id": name,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 300,
            }
        ))
        c.subscribe([topic])
        return c

    a = member("a")

    def poll_until(consumers: list[Consumer], check: Callable[[], object], what: str) -> object:
        def step() -> object:
            for c in consumers:
                c.poll(0.1)
            return check()

        return wait_for(step, 60, interval=0, what=what)

    poll_until([a], lambda: settled(admin, group, {"a"}), "a owns everything")
    b = member("b")
    split = poll_until([a, b], lambda: settled(admin, group, {"a", "b"}), "a and b share the partitions")
    assert isinstance(split, dict) and all(len(parts) == PARTITIONS // 2 for parts in split.values())

    b.close()  # LeaveGroup: a takes everything back without waiting for a session timeout
    poll_until([a], lambda: settled(admin, group, {"a"}), "a owns everything again")

    assert KCAT is not None
    crashing = subprocess.Popen(
        [
            KCAT,
            "-b",
            broker.bootstrap,
            "-G",
            group,
            topic,
            "-q",
            "-X",
            "client.id=c",
            "-X",
            f"session.timeout.ms={SESSION_MS}",
            "-X",
            "heartbeat.interval.ms=300",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        poll_until([a], lambda: settled(admin, group, {"a", "c"}), "kcat joins the group")
        crashing.send_signal(signal.SIGKILL)  # no LeaveGroup: only its session expiry removes it
        crashing.wait(10)
        poll_until([a], lambda: settled(admin, group, {"a"}), "kcat's session expires")
    finally:
        if crashing.poll() is None:
            crashing.kill()
    a.close()
