"""Start a single Kafka-compatible broker for Spark tests and benchmarks: odradek (or, on request, noida-db).

Kept free of pytest so ``bench/spark_source.py`` can start the same broker the tests use.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_clients import opened

BROKER_START_TIMEOUT_S = 60.0


@dataclass
class Broker:
    bootstrap: str
    kind: str
    process: subprocess.Popen
    data_dir: str

    def admin(self) -> AdminClient:
        return opened(AdminClient({"bootstrap.servers": self.bootstrap}))

    def create_topic(self, partitions: int = 1, name: str | None = None) -> str:
        topic = name or f"t-{uuid.uuid4().hex[:10]}"
        admin = self.admin()
        futures = admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=30)
        for future in futures.values():
            future.result()
        wait_for(lambda: _partition_count(self, topic) == partitions, what=f"topic {topic} to appear")
        return topic

    def produce(self, topic: str, records: list[dict], **config: object) -> None:
        """Produce dicts with value/key/partition/headers/timestamp; acks=all, fails on any delivery error."""
        producer = opened(Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5, **config}))
        errors: list[object] = []
        for r in records:
            kwargs = {k: v for k, v in r.items() if v is not None}
            producer.produce(topic, on_delivery=lambda err, _m: errors.append(err) if err else None, **kwargs)
            producer.poll(0)
        assert producer.flush(60) == 0
        assert not errors, errors


def _partition_count(broker: Broker, topic: str) -> int:
    md = broker.admin().list_topics(topic=topic, timeout=10)
    t = md.topics.get(topic)
    return 0 if t is None or t.error is not None else len(t.partitions)


def wait_for(condition: Callable[[], bool], *, what: str, timeout_s: float = 60.0, interval_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval_s)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, deadline: float) -> bool:
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def start_odradek(data_dir: str) -> tuple[subprocess.Popen, str] | None:
    """Start ``python -m odradek up`` and return it with its bootstrap address, or None if it cannot start."""
    ready = Path(data_dir) / "ready"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek",
            "up",
            "--schema-registry-port",
            "none",
            "--port",
            "0",
            "--data-dir",
            data_dir,
            "--ready-file",
            str(ready),
            "--override",
            "log.retention.check.interval.ms=500",  # lose_first_records waits for retention
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + BROKER_START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        if ready.exists():
            for line in ready.read_text().splitlines():
                if line.startswith("bootstrap.servers="):
                    return proc, line.split("=", 1)[1].strip()
        time.sleep(0.1)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    return None


def start_noida(data_dir: str) -> tuple[subprocess.Popen, str] | None:
    try:
        import noida_db
    except ImportError:
        return None
    # The package's binary itself: its console-script wrapper would not pass SIGTERM on.
    exe = str(Path(noida_db.__file__).parent / "noida-db")
    port = _free_port()
    proc = subprocess.Popen(
        [
            exe,
            "start",
            "--only",
            "kafka",
            "--host",
            "127.0.0.1",
            "--kafka-port",
            str(port),
            "--data-dir",
            data_dir,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if _wait_port(port, proc, time.monotonic() + BROKER_START_TIMEOUT_S):
        return proc, f"127.0.0.1:{port}"
    proc.kill()
    proc.wait()
    return None


def start_broker() -> Broker:
    """An odradek broker; ODRADEK_SPARK_BROKER=noida runs the same tests against the noida-db peer instead.

    There is deliberately no silent fallback: a broker that cannot start must fail the tests.
    """
    kind = os.environ.get("ODRADEK_SPARK_BROKER", "odradek")
    starters = {"odradek": start_odradek, "noida": start_noida}
    if kind not in starters:
        raise ValueError(f"ODRADEK_SPARK_BROKER must be one of {sorted(starters)}, not {kind!r}")
    data_dir = tempfile.mkdtemp(prefix=f"spark-{kind}-")
    started = starters[kind](data_dir)
    if started is None:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise RuntimeError(f"the {kind} broker did not start within {BROKER_START_TIMEOUT_S:.0f} s")
    return Broker(started[1], kind, started[0], data_dir)


def stop_broker(b: Broker) -> None:
    b.process.terminate()
    try:
        b.process.wait(20)
    except subprocess.TimeoutExpired:
        b.process.kill()
        b.process.wait()
    shutil.rmtree(b.data_dir, ignore_errors=True)


def lose_first_records(broker: Broker, topic: str, count: int, *, timeout_s: float = 60.0) -> None:
    """Put ``count`` records at the head of partition 0 and make the broker delete them.

    DeleteRecords where the broker has it; otherwise the records carry timestamps far older than the
    default retention, so time-based retention removes them (the test waits until it did).
    """
    from confluent_kafka import KafkaException, TopicPartition

    month_ago = int(time.time() * 1000) - 30 * 24 * 3600 * 1000
    broker.produce(topic, [{"value": b"%d" % i, "timestamp": month_ago, "partition": 0} for i in range(count)])
    admin = broker.admin()
    try:
        for future in admin.delete_records([TopicPartition(topic, 0, count)]).values():
            future.result()
    except KafkaException:
        pass  # no DeleteRecords: rely on retention
    from odradek.spark.cluster import Cluster

    cluster = Cluster({"bootstrap.servers": broker.bootstrap})
    wait_for(
        lambda: cluster.earliest([(topic, 0)])[(topic, 0)] >= count,
        what=f"the first {count} records of {topic} to be deleted",
        timeout_s=timeout_s,
        interval_s=0.5,
    )
