"""The Streams word count of ``java/WordCountApp.java`` as separate JVMs, its input, and its output read back.

Each instance is a ``java`` process on the ``kafka-streams`` bundle (:func:`odradek.apache_kafka.jars.streams`),
started with :func:`odradek.apache_kafka.java_command` and a state directory of its own. It prints one JSON line per
state change, which a reader thread collects so the test waits on ``RUNNING`` instead of sleeping; its log (WARN and
above) goes to a file beside the state directory, attached to any failure.

The input is generated from a seed: lines of known words with timestamps over three one-minute windows, so the
expected totals and window counts are computed here, not written down.
"""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import wait_for
from kafka_clients import opened
from odradek.apache_kafka import KAFKA_4, java_command

T = TypeVar("T")

JAVA_DIR = Path(__file__).parent / "java"
MAIN_CLASS = "WordCountApp"
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"]
WINDOW_MS = 60_000
"""WordCountApp's tumbling window."""


APP = "wordcount"
"""The application id: its group, its transactional ids' prefix and its internal topics' prefix."""
INPUT, OUTPUT, PARTITIONS = "lines", "word-counts-out", 3
REPARTITION = f"{APP}-words-repartition"
COUNTS_CHANGELOG = f"{APP}-word-counts-changelog"
WINDOWED_CHANGELOG = f"{APP}-windowed-counts-changelog"


def leader(admin: AdminClient, topic: str, partition: int) -> int:
    meta = admin.list_topics(topic, timeout=30).topics[topic]
    return -1 if meta.error is not None else meta.partitions[partition].leader


def _asked(group: str, bootstrap: str, ask: Callable[[Consumer], T], timeout: float = 60.0) -> T:
    """``ask(consumer)`` with a fresh consumer, asked again while librdkafka fails it (a broker just killed: its
    handle destroyed, the request timed out) until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                    "isolation.level": "read_committed"}))
        try:
            return ask(consumer)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
        finally:
            consumer.close()
        time.sleep(0.2)


def committed(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    """The application group's committed offsets on ``topic`` (asked with require_stable, as read_committed does)."""

    def ask(consumer: Consumer) -> dict[int, int]:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in found}

    return _asked(APP, bootstrap, ask)


def watermarks(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[int, tuple[int, int]]:
    """(log start offset, high watermark) per partition."""

    def ask(consumer: Consumer) -> dict[int, tuple[int, int]]:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in range(partitions)}

    return _asked(f"{topic}-watermarks", bootstrap, ask)


def ends(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    return {p: high for p, (_low, high) in watermarks(bootstrap, topic, partitions).items()}


def starts(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[int, int]:
    return {p: low for p, (low, _high) in watermarks(bootstrap, topic, partitions).items()}


def create_topics(admin: AdminClient) -> None:
    """The input and both outputs: RF 3 with min.insync.replicas=2, so one broker may die."""
    topics = [NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})
              for t in (INPUT, OUTPUT, f"{OUTPUT}-windowed")]
    for future in admin.create_topics(topics).values():
        future.result(30)


class Instance:
    """One application instance (a JVM) with ``work_dir/state-<state>`` as its state directory and
    ``work_dir/<name>.log`` as its log; ``settings`` are WordCountApp's extra arguments. ``kill`` is SIGKILL,
    ``stop`` is SIGTERM (Streams closes cleanly)."""

    def __init__(self, name: str, state: str, bootstrap: str, classes: Path, lib: Path, work_dir: Path,
                 *settings: str) -> None:
        self.name = name
        self.log_path = work_dir / f"{name}.log"
        args = [bootstrap, APP, INPUT, OUTPUT, str(work_dir / f"state-{state}"), *settings]
        self.states: list[str] = []
        self.exceptions: list[str] = []
        self.acked: Counter[str] = Counter()  # with print-acks: the records its producers had acknowledged, per topic
        self._changed = threading.Condition()
        command = java_command(KAFKA_4, MAIN_CLASS, *args, classpath=[classes], lib=lib, heap_mb=256)
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                         text=True)
        self._reader = threading.Thread(target=self._read, name=f"streams-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            event: dict[str, Any] = json.loads(line)
            with self._changed:
                if "state" in event:
                    self.states.append(event["state"])
                if "exception" in event:
                    self.exceptions.append(event["exception"])
                if "acked" in event:
                    self.acked[event["acked"]] += 1
                self._changed.notify_all()

    def acknowledged(self, topic: str) -> int:
        with self._changed:
            return self.acked[topic]

    def log_tail(self) -> str:
        return self.log_path.read_text()[-6000:] if self.log_path.exists() else ""

    def wait_running(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self.states or self.states[-1] != "RUNNING":
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None or "ERROR" in self.states:
                    raise AssertionError(f"{self.name} not RUNNING (states {self.states}):\n{self.log_tail()}")
                self._changed.wait(min(left, 1.0))

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM, as the ``kill`` command sends: the application's shutdown hook closes Streams (committing its last
        transaction), which must end NOT_RUNNING; the JVM then exits 143, as on any SIGTERM."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout)
        self._reader.join(timeout)
        assert self.states[-1:] == ["NOT_RUNNING"], f"{self.name} closed as {self.states}:\n{self.log_tail()}"


def input_lines(seed: int, count: int, base_ms: int) -> list[tuple[str, str, int]]:
    """``count`` lines of (key, text, timestamp): one to six known words each, some upper case (the application
    lower-cases them), timestamps spread over three windows from ``base_ms`` (a window start) and out of order."""
    rng = random.Random(seed)
    lines = []
    for i in range(count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 6))]
        text = " ".join(w.upper() if rng.random() < 0.1 else w for w in words)
        lines.append((f"line-{seed}-{i}", text, base_ms + rng.randrange(3 * WINDOW_MS)))
    return lines


def expected_counts(lines: Iterable[tuple[str, str, int]]) -> tuple[dict[str, int], dict[str, int]]:
    """The totals per word and the counts per ``word@windowStart``, as WordCountApp's two outputs key them."""
    totals: Counter[str] = Counter()
    windowed: Counter[str] = Counter()
    for _key, text, ts in lines:
        for word in text.lower().split():
            totals[word] += 1
            windowed[f"{word}@{ts - ts % WINDOW_MS}"] += 1
    return dict(totals), dict(windowed)


def produce(bootstrap: str, topic: str, lines: Iterable[tuple[str, str, int]]) -> None:
    producer = opened(Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                "linger.ms": 5}))
    for key, text, ts in lines:
        producer.produce(topic, key=key.encode(), value=text.encode(), timestamp=ts)
    assert producer.flush(60) == 0


class CommittedOutput:
    """A read_committed consumer over a table-like output topic from given offsets: every value seen per key, in
    order, read a little more on each :meth:`read`."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, start: dict[int, int] | None = None) -> None:
        self.topic = topic
        self.values: dict[str, list[int]] = {}
        self.consumer = opened(Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"{topic}-verifier", "isolation.level": "read_committed",
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
        }))
        self.consumer.assign([TopicPartition(topic, p, (start or {}).get(p, 0)) for p in range(partitions)])

    def read(self) -> dict[str, int]:
        """The last value per key so far."""
        for message in self.consumer.consume(2000, timeout=0.2):
            if message.error() is None:
                key = message.key().decode()
                self.values.setdefault(key, []).append(int.from_bytes(message.value(), "big", signed=True))
        return {key: values[-1] for key, values in self.values.items()}

    def wait_for_exactly(self, expected: dict[str, int], timeout: float) -> None:
        """Until the last value per key is ``expected``; a value past its expected total (a record counted twice)
        fails at once, as does a key's series that does not strictly increase (a committed update repeated)."""

        over: dict[str, tuple[int, int | None]] = {}

        def settled() -> bool:
            last = self.read()
            over.update((k, (v, expected.get(k))) for k, v in last.items() if v > expected.get(k, 0))
            return bool(over) or last == expected

        try:
            wait_for(settled, timeout, interval=0.2, what=f"{self.topic} to reach the expected counts")
        except AssertionError:
            last = self.read()
            missing = {k: (last.get(k), v) for k, v in expected.items() if last.get(k) != v}
            raise AssertionError(f"{self.topic}: (seen, expected) where they differ: {missing}") from None
        assert not over, f"{self.topic}: counted past the expected totals (seen, expected): {over}"
        repeated = {k: vs for k, vs in self.values.items() if any(b <= a for a, b in itertools.pairwise(vs))}
        assert not repeated, f"{self.topic}: a key's committed counts do not strictly increase: {repeated}"
