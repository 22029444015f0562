"""The verifiable producer and consumer and the producer and consumer perf tests against odradek and Apache Kafka 3.9:
the same events with the same fields and deterministic values, and the perf tools' output in the same shape (their
numbers are measurements, never compared)."""

from __future__ import annotations

import json
import re
from typing import Any

from tools_support import CONSUMER_PERF, PRODUCER_PERF, TOPICS, VERIFIABLE_CONSUMER, VERIFIABLE_PRODUCER, Pair

B = ("--bootstrap-server", "{bootstrap}")
VARYING = {"timestamp", "avg_throughput", "target_throughput", "elapsed_time_ms", "memberId", "member_id"}


def _events(stdout: str) -> list[dict[str, Any]]:
    """Each JSON line with its varying values (times, rates) blanked; every key kept."""
    events = []
    for line in stdout.splitlines():
        event = json.loads(line.replace("<epoch-ms>", '"<epoch-ms>"'))  # the normalised timestamps
        events.append({k: ("<varies>" if k in VARYING else v) for k, v in event.items()})
    return events


def test_verifiable_producer_and_consumer(pair: Pair, topic: str) -> None:
    pair.same(TOPICS, *B, "--create", "--topic", topic)  # one partition: keyless records land where they may
    produced = pair.run(VERIFIABLE_PRODUCER, *B, "--topic", topic, "--max-messages", "20", "--acks", "-1",
                        "--value-prefix", "7")
    for out in produced.values():
        assert out.returncode == 0, out.stderr
    kafka, odradek = (_events(produced[who].stdout) for who in ("kafka", "odradek"))
    assert [e["name"] for e in kafka].count("producer_send_success") == 20
    assert sorted(map(json.dumps, odradek)) == sorted(map(json.dumps, kafka))  # sends complete in any order

    consumed = pair.run(VERIFIABLE_CONSUMER, *B, "--topic", topic, "--group-id", f"g-{topic}", "--max-messages", "20",
                        "--reset-policy", "earliest")
    for out in consumed.values():
        assert out.returncode == 0, out.stderr
    kafka, odradek = (_events(consumed[who].stdout) for who in ("kafka", "odradek"))
    assert [e["name"] for e in odradek] == [e["name"] for e in kafka]
    assert odradek == kafka


def _shape(text: str) -> str:
    return re.sub(r"-?\d+(\.\d+)?", "<n>", text)


def test_perf_tests_print_the_same_shape(pair: Pair, topic: str) -> None:
    pair.same(TOPICS, *B, "--create", "--topic", topic)
    produced = pair.run(PRODUCER_PERF, "--topic", topic, "--num-records", "2000", "--record-size", "100",
                        "--throughput", "-1", "--producer-props", "bootstrap.servers={bootstrap}", "acks=1")
    assert produced["kafka"].returncode == produced["odradek"].returncode == 0
    assert _shape(produced["odradek"].stdout).splitlines()[-1] == _shape(produced["kafka"].stdout).splitlines()[-1]
    assert produced["kafka"].stdout.splitlines()[-1].startswith("2000 records sent")
    consumed = pair.run(CONSUMER_PERF, *B, "--topic", topic, "--messages", "2000", "--timeout", "60000")
    assert consumed["kafka"].returncode == consumed["odradek"].returncode == 0
    assert _shape(consumed["odradek"].stdout) == _shape(consumed["kafka"].stdout)
    header, row = consumed["kafka"].stdout.splitlines()[-2:]
    assert header.startswith("start.time, end.time, data.consumed.in.MB")
    assert len(row.split(",")) == len(header.split(","))
