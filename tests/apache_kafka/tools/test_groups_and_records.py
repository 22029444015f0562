"""The console producer and consumer, kafka-consumer-groups, kafka-get-offsets, kafka-delete-records and
kafka-log-dirs against odradek and Apache Kafka 3.9, on the same records, with equal output after normalisation."""

from __future__ import annotations

import json
from pathlib import Path

from tools_support import (
    CONSOLE_CONSUMER,
    CONSOLE_PRODUCER,
    DELETE_RECORDS,
    GET_OFFSETS,
    GROUPS,
    LOG_DIRS,
    TOPICS,
    Pair,
)

B = ("--bootstrap-server", "{bootstrap}")
RECORDS = "k1:a\nk2:b\nk3:c\nk1:d\nk4:e\nk5:f\n"


def test_produce_consume_groups_offsets_records(pair: Pair, topic: str, tmp_path: Path) -> None:
    group = f"g-{topic}"
    pair.same(TOPICS, *B, "--create", "--topic", topic, "--partitions", "2")
    pair.same(CONSOLE_PRODUCER, *B, "--topic", topic, "--property", "parse.key=true", "--property",
              "key.separator=:", input=RECORDS)
    consumed = pair.same(CONSOLE_CONSUMER, *B, "--topic", topic, "--group", group, "--from-beginning",
                         "--max-messages", "6", "--property", "print.key=true", "--property", "print.partition=true",
                         "--property", "print.offset=true")
    assert sorted(line.rsplit("\t", 1)[1] for line in consumed.stdout.splitlines()) == list("abcdef")
    pair.same(GET_OFFSETS, *B, "--topic", topic)
    pair.same(GET_OFFSETS, *B, "--topic", topic, "--time", "-2")

    listed = pair.run(GROUPS, *B, "--list")
    assert group in listed["kafka"].stdout.split() and group in listed["odradek"].stdout.split()
    for view in ((), ("--members",), ("--members", "--verbose"), ("--state",), ("--offsets",)):
        pair.same(GROUPS, *B, "--describe", "--group", group, *view)
    pair.same(GROUPS, *B, "--describe", "--group", f"{group}-missing")
    reset = (*B, "--reset-offsets", "--group", group, "--topic", topic)
    pair.same(GROUPS, *reset, "--to-earliest", "--dry-run")
    pair.same(GROUPS, *reset, "--to-offset", "1", "--execute")
    pair.same(GROUPS, *reset, "--shift-by", "-1", "--execute")
    pair.same(GROUPS, *reset, "--to-latest", "--execute")
    pair.same(GROUPS, *B, "--describe", "--group", group, "--offsets")

    offsets = tmp_path / "delete-records.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": topic, "partition": 1, "offset": 2}], "version": 1}))
    pair.same(DELETE_RECORDS, *B, "--offset-json-file", str(offsets))
    pair.same(GET_OFFSETS, *B, "--topic", topic, "--time", "-2")
    pair.same(LOG_DIRS, *B, "--describe", "--topic-list", topic)

    pair.same(GROUPS, *B, "--delete-offsets", "--group", group, "--topic", f"{topic}:0")
    pair.same(GROUPS, *B, "--delete-offsets", "--group", group, "--topic", topic)
    pair.same(GROUPS, *B, "--delete", "--group", group)  # Dead once its last offsets went, as in Kafka


def test_delete_group(pair: Pair, topic: str) -> None:
    group = f"g-{topic}"
    # Created first: on an auto-created topic Kafka's first Metadata answer is LEADER_NOT_AVAILABLE (a WARN line from
    # the producer), odradek's already has the leader (docs/compatibility.md)
    pair.same(TOPICS, *B, "--create", "--topic", topic)
    pair.same(CONSOLE_PRODUCER, *B, "--topic", topic, input="x\n")
    pair.same(CONSOLE_CONSUMER, *B, "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "1")
    pair.same(GROUPS, *B, "--delete", "--group", group)
    pair.same(GROUPS, *B, "--delete", "--group", group)
