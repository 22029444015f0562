"""Kafka 3.9's command-line tools run against Apache Kafka 3.9 and against odradek, their outputs compared after
normalising what legitimately differs: addresses and ports, topic and member ids, log directories, timestamps.

Tests import from here (``from tools_support import ...``). Each command is given with ``{bootstrap}`` where the
broker address goes and runs against both brokers at once (two JVMs, one per broker).
"""

from __future__ import annotations

import difflib
import re
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from odradek.apache_kafka import KAFKA_3, run_tool

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CONSOLE_PRODUCER = "kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
ACLS = "kafka.admin.AclCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
DUMP_LOG = "kafka.tools.DumpLogSegments"
"""Main classes as Kafka 3.9's ``bin/kafka-*.sh`` scripts name them."""

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\]", re.M), "[<time>]"),
    (re.compile(r"TopicId: [A-Za-z0-9_-]{22}"), "TopicId: <topic-id>"),
    (re.compile(r'"logDir":"[^"]*"'), '"logDir":"<log-dir>"'),
    (re.compile(r"\b(console-consumer|consumer-[\w.-]+?-\d+|rdkafka)-[0-9a-f]{8}-[0-9a-f-]{27}\b"), "<member-id>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "<host:port>"),
    (re.compile(r"\b1[6-9]\d{11}\b"), "<epoch-ms>"),
]


def normalise(text: str, extra: Sequence[tuple[str, str]] = ()) -> str:
    for old, new in extra:
        text = text.replace(old, new)
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text


@dataclass(frozen=True)
class Output:
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Pair:
    """Apache Kafka 3.9 and odradek, one broker each, addressed by their bootstrap strings."""

    kafka: str
    odradek: str
    kafka_log_dir: Path
    odradek_log_dir: Path

    def run(
        self,
        main_class: str,
        *args: str,
        input: str | None = None,
        timeout: float = 120.0,
        files: Callable[[str], Sequence[tuple[str, str]]] = lambda _who: (),
    ) -> dict[str, Output]:
        """The tool against each broker at once, normalised; ``files(who)`` gives more (old, new) replacements for
        the arguments (a path per broker) and undone in the output."""

        def one(who: str) -> Output:
            bootstrap = self.kafka if who == "kafka" else self.odradek
            swaps = [("{bootstrap}", bootstrap), *files(who)]
            argv = [_swap(a, swaps) for a in args]
            result: subprocess.CompletedProcess[str] = run_tool(KAFKA_3, main_class, *argv, input=input,
                                                                timeout=timeout)
            back = [(new, old) for old, new in swaps if new]
            return Output(result.returncode, normalise(result.stdout, back), normalise(result.stderr, back))

        with ThreadPoolExecutor(2) as pool:
            kafka, odradek = pool.map(one, ["kafka", "odradek"])
        return {"kafka": kafka, "odradek": odradek}

    def same(self, main_class: str, *args: str, **kwargs: object) -> Output:
        """Run against both and assert the normalised outputs equal; Kafka's output is returned for more checks."""
        outputs = self.run(main_class, *args, **kwargs)  # type: ignore[arg-type]
        kafka, odradek = outputs["kafka"], outputs["odradek"]
        assert odradek == kafka, f"{main_class} {' '.join(args)}:\n{diff(kafka, odradek)}"
        return kafka


def diff(kafka: Output, odradek: Output) -> str:
    parts = [f"exit code: kafka {kafka.returncode}, odradek {odradek.returncode}"]
    for stream in ("stdout", "stderr"):
        a, b = getattr(kafka, stream).splitlines(), getattr(odradek, stream).splitlines()
        if a != b:
            parts.append(f"{stream}:\n" + "\n".join(difflib.unified_diff(a, b, "kafka", "odradek", lineterm="")))
    return "\n".join(parts)


def _swap(arg: str, swaps: Sequence[tuple[str, str]]) -> str:
    for old, new in swaps:
        arg = arg.replace(old, new)
    return arg
