"""``odradek groups``: lag against a real consumer's committed offsets, resets a consumer resumes from, list, delete."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from cli_support import table
from click.testing import Result
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_clients import opened
from odradek.cli.groups import ResetSpec, plan_reset
from odradek.testing import ThreadedCluster

PARTITIONS, PER_PARTITION = 3, 10
# Ten minutes ago on a whole second: recent enough that time-based retention (7 days) keeps the records.
BASE_TS = (int(time.time()) - 600) * 1000


def make_topic(bootstrap: str, topic: str) -> None:
    """``topic`` with PER_PARTITION records in each partition; record i of a partition has timestamp BASE_TS + i s."""
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))  # held: a collected client fails its futures
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    producer = opened(Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}))
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, f"v{p}-{i}".encode(), partition=p, timestamp=BASE_TS + i * 1000)
    assert producer.flush(30) == 0


def group_consumer(bootstrap: str, group: str) -> Consumer:
    return opened(Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "session.timeout.ms": 6000}))


def consume(consumer: Consumer, count: int, timeout: float = 30.0) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"consumed {len(got)} of {count}"
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message)
    return got


def first_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The offset a fresh member of ``group`` starts each partition at (what a reset must have set)."""
    consumer = group_consumer(bootstrap, group)
    consumer.subscribe([topic])
    firsts: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 30
        while len(firsts) < PARTITIONS:
            assert time.monotonic() < deadline, f"saw only partitions {sorted(firsts)}"
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                firsts.setdefault(message.partition(), message.offset())
    finally:
        consumer.close()
    return firsts


def test_describe_lag_matches_committed_offsets_then_reset_is_refused_while_active(
    cluster: ThreadedCluster, cli: Callable[..., Result], name: str,
) -> None:
    bootstrap, group = cluster.bootstrap, f"g-{name}"
    make_topic(bootstrap, name)
    consumer = group_consumer(bootstrap, group)
    consumer.subscribe([name])
    try:
        consume(consumer, 13)
        consumer.commit(asynchronous=False)
        committed = {tp.partition: tp.offset for tp in
                     consumer.committed([TopicPartition(name, p) for p in range(PARTITIONS)], timeout=30)}
        assert sum(o for o in committed.values() if o >= 0) == 13

        result = cli("groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
        assert result.exit_code == 0, result.output
        rows = {int(r["PARTITION"]): r for r in table(result.stdout)}
        assert set(rows) == set(range(PARTITIONS))
        for p, row in rows.items():
            assert row["GROUP"] == group and row["TOPIC"] == name
            assert row["LOG-END-OFFSET"] == str(PER_PARTITION)
            if committed[p] >= 0:
                assert row["CURRENT-OFFSET"] == str(committed[p])
                assert row["LAG"] == str(PER_PARTITION - committed[p])
            else:  # assigned, nothing committed yet: Kafka prints "-"
                assert row["CURRENT-OFFSET"] == "-" and row["LAG"] == "-"
            assert row["CONSUMER-ID"] == consumer.memberid()
            assert row["CLIENT-ID"] == "rdkafka"

        refused = cli("groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
                      "--topic", name, "--to-earliest", "--execute")
        assert refused.exit_code == 1
        assert (f"Error: Assignments can only be reset if the group '{group}' is inactive, but the current state "
                "is Stable.") in refused.stdout
    finally:
        consumer.close()

    after = cli("groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in after.stderr
    assert all(r["CONSUMER-ID"] == "-" for r in table(after.stdout))


def test_reset_offsets_are_where_a_consumer_resumes(
    cluster: ThreadedCluster, cli: Callable[..., Result], name: str,
) -> None:
    bootstrap, group = cluster.bootstrap, f"g-{name}"
    make_topic(bootstrap, name)
    consumer = group_consumer(bootstrap, group)
    consumer.subscribe([name])
    consume(consumer, PARTITIONS * PER_PARTITION)
    consumer.commit(asynchronous=False)
    consumer.close()

    def reset(*how: str, scope: tuple[str, ...] = ("--topic", name)) -> Result:
        result = cli("groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, *scope, *how)
        assert result.exit_code == 0, result.output
        return result

    dry = reset("--to-offset", "4", "--dry-run")
    assert {r["NEW-OFFSET"] for r in table(dry.stdout)} == {"4"}
    described = table(cli("groups", "--bootstrap-server", bootstrap, "--describe", "--group", group).stdout)
    assert {r["CURRENT-OFFSET"] for r in described} == {str(PER_PARTITION)}  # a dry run changes nothing

    reset("--to-offset", "4", "--execute")
    assert first_offsets(bootstrap, group, name) == dict.fromkeys(range(PARTITIONS), 4)

    reset("--to-earliest", "--execute", scope=("--topic", f"{name}:1"))  # one partition only
    reset("--shift-by", "-3", "--execute", scope=("--topic", f"{name}:0,2"))
    assert first_offsets(bootstrap, group, name) == {0: 1, 1: 0, 2: 1}

    too_far = reset("--to-offset", "99", "--execute", scope=("--all-topics",))
    assert f"New offset (99) is higher than latest offset for topic partition {name}-0. Value will be set to 10" \
        in too_far.stdout
    assert {r["NEW-OFFSET"] for r in table(too_far.stdout)} == {str(PER_PARTITION)}

    # the first record at or after BASE_TS + 6.5 s is record 7 of every partition
    when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((BASE_TS + 6500) // 1000)) + ".500Z"
    reset("--to-datetime", when, "--execute")
    assert first_offsets(bootstrap, group, name) == dict.fromkeys(range(PARTITIONS), 7)


def test_list_and_delete(cluster: ThreadedCluster, cli: Callable[..., Result], name: str) -> None:
    bootstrap, group = cluster.bootstrap, f"g-{name}"
    make_topic(bootstrap, name)
    consumer = group_consumer(bootstrap, group)
    consumer.subscribe([name])
    consume(consumer, 1)
    consumer.commit(asynchronous=False)

    assert group in cli("groups", "--bootstrap-server", bootstrap, "--list").stdout.split()
    busy = cli("groups", "--bootstrap-server", bootstrap, "--delete", "--group", group)
    assert busy.exit_code == 1 and "NON_EMPTY_GROUP" in busy.stdout
    consumer.close()

    deleted = cli("groups", "--bootstrap-server", bootstrap, "--delete", "--group", group)
    assert deleted.exit_code == 0, deleted.output
    assert f"Deletion of requested consumer groups ('{group}') was successful." in deleted.stdout
    assert group not in cli("groups", "--bootstrap-server", bootstrap, "--list").stdout.split()
    missing = cli("groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert missing.exit_code == 1 and f"Error: Consumer group '{group}' does not exist." in missing.stdout


@pytest.mark.parametrize(("spec", "expected"), [
    (ResetSpec("earliest"), {0: 2, 1: 0}),
    (ResetSpec("latest"), {0: 9, 1: 5}),
    (ResetSpec("current"), {0: 4, 1: 5}),  # partition 1 has no committed offset: the log end
    (ResetSpec("offset", 3), {0: 3, 1: 3}),
    (ResetSpec("offset", 1), {0: 2, 1: 1}),  # below partition 0's log start: clamped up
])
def test_plan_reset_scenarios(spec: ResetSpec, expected: dict[int, int]) -> None:
    tps = [("t", 0), ("t", 1)]
    plan, _notes = plan_reset(spec, tps, {("t", 0): 4}, {("t", 0): 2, ("t", 1): 0}, {("t", 0): 9, ("t", 1): 5})
    assert {p: o for (_t, p), o in plan.items()} == expected


def test_plan_reset_shift_and_datetime() -> None:
    earliest, latest = {("t", 0): 0}, {("t", 0): 10}
    plan, notes = plan_reset(ResetSpec("shift", -7), [("t", 0)], {("t", 0): 4}, earliest, latest)
    assert plan == {("t", 0): 0} and "is lower than earliest offset" in notes[0]
    plan, _ = plan_reset(ResetSpec("datetime", 5), [("t", 0)], {}, earliest, latest, {("t", 0): -1})
    assert plan == {("t", 0): 10}  # no record at or after that time: the log end, as Kafka does
