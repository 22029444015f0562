"""kafka-acls, kafka-leader-election, kafka-transactions and kafka-reassign-partitions against odradek and Apache
Kafka 3.9, with equal output after normalisation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from tools_support import ACLS, CONFIGS, LEADER_ELECTION, REASSIGN, TOPICS, TRANSACTIONS, Output, Pair

from brokers import wait_for
from kafka_clients import opened

B = ("--bootstrap-server", "{bootstrap}")
VARYING = ("TransactionDurationMs", "ProducerId")
def test_acls_without_an_authorizer(pair: Pair) -> None:
    out = pair.same(ACLS, *B, "--list")
    assert "SecurityDisabledException: No Authorizer is configured on the broker" in out.stdout + out.stderr
    pair.same(ACLS, *B, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t")


def test_leader_election(pair: Pair, topic: str) -> None:
    pair.same(TOPICS, *B, "--create", "--topic", topic, "--partitions", "2")
    assert pair.same(LEADER_ELECTION, *B, "--election-type", "preferred", "--all-topic-partitions").stdout == ""
    pair.same(LEADER_ELECTION, *B, "--election-type", "preferred", "--topic", topic, "--partition", "1")
    pair.same(LEADER_ELECTION, *B, "--election-type", "unclean", "--topic", topic, "--partition", "0")
    pair.same(LEADER_ELECTION, *B, "--election-type", "preferred", "--topic", f"{topic}-missing", "--partition", "0")


def _transactional_writes(bootstrap: str, topic: str) -> None:
    producer = opened(Producer({"bootstrap.servers": bootstrap, "transactional.id": f"txn-{topic}"}))
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"v")
    producer.flush(30)
    producer.commit_transaction(60)


def _masked(out: Output, *columns: str) -> tuple[int, list[list[str]], str]:
    """A tool's table with the named columns blanked: TransactionDurationMs is now minus the start (a clock reading),
    ProducerId depends on how many producers the broker has met (the Kafka broker is the session's)."""
    rows = [line.split("\t") for line in out.stdout.splitlines()]
    masked = [i for i, name in enumerate(rows[0] if rows else []) if name.strip() in columns]
    for row in rows[1:]:
        for i in masked:
            row[i] = "<varies>"
    return out.returncode, rows, out.stderr


def test_transactions(pair: Pair, topic: str) -> None:
    pair.same(TOPICS, *B, "--create", "--topic", topic)
    _transactional_writes(pair.kafka, topic)
    _transactional_writes(pair.odradek, topic)
    # The commit returns once PrepareCommit is written; the markers, then CompleteCommit, follow on both brokers
    described = wait_for(lambda: (outs := pair.run(TRANSACTIONS, *B, "describe", "--transactional-id", f"txn-{topic}"))
                         and all("CompleteCommit" in o.stdout for o in outs.values()) and outs,
                         timeout=120, interval=0.5, what="both transactions complete")
    assert isinstance(described, dict)
    assert _masked(described["odradek"], *VARYING) == _masked(described["kafka"], *VARYING)
    pair.same(TRANSACTIONS, *B, "describe", "--transactional-id", f"{topic}-missing")
    producers = pair.run(TRANSACTIONS, *B, "describe-producers", "--topic", topic, "--partition", "0")
    assert _masked(producers["odradek"], *VARYING) == _masked(producers["kafka"], *VARYING)
    pair.same(TRANSACTIONS, *B, "find-hanging", "--broker-id", "1")
    listed = pair.run(TRANSACTIONS, *B, "list")
    for out in listed.values():
        assert out.returncode == 0
        assert any(line.startswith(f"txn-{topic}\t") and "CompleteCommit" in line for line in out.stdout.splitlines())


def _reassignment(tmp_path: Path, topic: str) -> tuple[Path, Path]:
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": ["any"]}]}))
    return topics, plan


def test_reassign_generate_execute_list(pair: Pair, topic: str, tmp_path: Path) -> None:
    topics, plan = _reassignment(tmp_path, topic)
    pair.same(TOPICS, *B, "--create", "--topic", topic, "--partitions", "2")
    pair.same(REASSIGN, *B, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1")
    assert "Successfully started partition reassignment" in pair.same(
        REASSIGN, *B, "--execute", "--reassignment-json-file", str(plan)).stdout
    pair.same(REASSIGN, *B, "--list")


def test_reassign_execute_with_throttle(pair: Pair, topic: str, tmp_path: Path) -> None:
    _topics, plan = _reassignment(tmp_path, topic)
    pair.same(TOPICS, *B, "--create", "--topic", topic)
    describe = (CONFIGS, *B, "--entity-type", "brokers", "--entity-name", "1", "--describe")
    try:
        pair.same(REASSIGN, *B, "--execute", "--reassignment-json-file", str(plan), "--throttle", "1000000")
        # a broker applies its dynamic config when the change notification reaches it, after the tool is answered
        _on_both(pair, describe, lambda out: "leader.replication.throttled.rate=1000000" in out)
        pair.same(*describe)
    finally:  # the completed reassignment's verify clears the throttle: the Kafka broker is the session's
        pair.same(REASSIGN, *B, "--verify", "--reassignment-json-file", str(plan))
    _on_both(pair, describe, lambda out: "throttled.rate" not in out)


def _on_both(pair: Pair, command: tuple[str, ...], holds: Callable[[str], bool]) -> None:
    wait_for(lambda: all(holds(out.stdout) for out in pair.run(*command).values()), 60,
             what=f"{' '.join(command[1:])} on both brokers")


def test_reassign_verify(pair: Pair, topic: str, tmp_path: Path) -> None:
    _topics, plan = _reassignment(tmp_path, topic)
    pair.same(TOPICS, *B, "--create", "--topic", topic)
    pair.same(REASSIGN, *B, "--verify", "--reassignment-json-file", str(plan))
