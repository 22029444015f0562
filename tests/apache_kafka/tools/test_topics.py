"""kafka-topics (TopicCommand) against odradek and Apache Kafka 3.9: create, list, describe, alter, delete, and the
errors users meet, with equal output after normalisation."""

from __future__ import annotations

import re

import pytest
from tools_support import TOPICS, Output, Pair, diff

from brokers import wait_for

B = ("--bootstrap-server", "{bootstrap}")


def _without_elr(text: str) -> str:
    """The ELR columns (KIP-966): Kafka 3.9 in ZooKeeper mode prints ``N/A`` (no DescribeTopicPartitions),
    odradek serves that API and prints the empty lists a KRaft broker prints."""
    return re.sub(r"\tElr: [^\t]*\tLastKnownElr: .*", "", text)


def _describe(pair: Pair, *args: str, expect: str = "") -> str:
    """``--describe`` on both brokers, equal but for the ELR columns (checked apart, as a known difference), once
    both show ``expect`` and every partition has a leader (partitions added by ``--alter`` come a moment later)."""
    described = wait_for(lambda: (outs := pair.run(TOPICS, *B, "--describe", *args))
                         and all(expect in o.stdout and "Leader: none" not in o.stdout for o in outs.values())
                         and outs,
                         timeout=120, interval=0.5, what="a leader for every partition on both")
    assert isinstance(described, dict)
    kafka, odradek = (Output(o.returncode, _without_elr(o.stdout), o.stderr) for o in described.values())
    assert odradek == kafka, diff(kafka, odradek)
    return kafka.stdout


def test_create_list_describe_alter_delete(pair: Pair, topic: str) -> None:
    out = pair.same(TOPICS, *B, "--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1",
                    "--config", "retention.ms=1000", "--config", "cleanup.policy=compact")
    assert out.stdout == f"Created topic {topic}.\n"
    assert pair.same(TOPICS, *B, "--list", "--topic", f"{topic}.*").stdout == f"{topic}\n"
    pair.same(TOPICS, *B, "--alter", "--topic", topic, "--partitions", "5")
    assert "PartitionCount: 5\tReplicationFactor: 1\tConfigs: cleanup.policy=compact,retention.ms=1000" \
        in _describe(pair, "--topic", topic, expect="PartitionCount: 5")
    for option in ("--under-replicated-partitions", "--unavailable-partitions", "--at-min-isr-partitions",
                   "--under-min-isr-partitions"):
        _describe(pair, "--topic", topic, option)  # at-min-isr lists every partition: RF 1, min ISR 1
    pair.same(TOPICS, *B, "--delete", "--topic", topic)
    # deletion completes in the background on both; the tool itself prints nothing on success


@pytest.mark.xfail(strict=True, reason="odradek serves DescribeTopicPartitions (KIP-966), which Kafka 3.9 in ZooKeeper "
                   "mode does not: kafka-topics prints 'Elr: ' where Kafka 3.9 prints 'Elr: N/A' "
                   "(docs/compatibility.md)")
def test_describe_elr_columns(pair: Pair, topic: str) -> None:
    pair.same(TOPICS, *B, "--create", "--topic", topic)
    pair.same(TOPICS, *B, "--describe", "--topic", topic)


ERRORS = {
    "exists": ["--create", "--topic", "{topic}"],
    "invalid-name": ["--create", "--topic", "bad/{topic}"],
    "dot-name": ["--create", "--topic", ".."],
    "too-long-name": ["--create", "--topic", "x" * 250],
    "replication-factor": ["--create", "--topic", "{topic}-rf", "--replication-factor", "3"],
    "unknown-config": ["--create", "--topic", "{topic}-cfg", "--config", "no.such.config=1"],
    "bad-config-value": ["--create", "--topic", "{topic}-val", "--config", "retention.ms=soon"],
    "zero-partitions": ["--create", "--topic", "{topic}-zero", "--partitions", "0"],
    "describe-missing": ["--describe", "--topic", "{topic}-missing"],
    "delete-missing": ["--delete", "--topic", "{topic}-missing"],
    "alter-decrease": ["--alter", "--topic", "{topic}", "--partitions", "1"],
    "alter-missing": ["--alter", "--topic", "{topic}-missing", "--partitions", "4"],
}


@pytest.fixture(scope="module")
def existing(pair: Pair) -> str:
    name = "t-errors"
    pair.same(TOPICS, *B, "--create", "--topic", name, "--partitions", "2")
    return name


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_errors(pair: Pair, existing: str, case: str) -> None:
    args = [a.replace("{topic}", existing) for a in ERRORS[case]]
    out = pair.same(TOPICS, *B, *args)
    assert out.returncode != 0 or "does not exist" in out.stdout + out.stderr
