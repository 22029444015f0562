"""Clean stop of one broker holding many logs: SIGTERM to process exit.

A clean stop flushes every log, snapshots producer state, writes the offset checkpoints and the clean-shutdown
marker. The bench creates ``--partitions`` partitions on one broker (RF 1), produces one record to each
(a broker opens a log on its first write), then times SIGTERM to exit and checks that the marker
was written.

    .venv/bin/python bench/clean_stop.py                        # 10,000 partitions
    .venv/bin/python bench/clean_stop.py --partitions 1000
    .venv/bin/python bench/clean_stop.py --restart   # and the stop of a restarted broker, its logs loaded and written
    .venv/bin/python bench/clean_stop.py --idempotent   # every log with producer state to snapshot
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def start(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = data_dir.parent / "ready"
    ready.unlink(missing_ok=True)  # a restart must not read the previous run's address
    cmd = [sys.executable, "-m", "odradek", "up", "--port", "0", "--data-dir", str(data_dir),
           "--ready-file", str(ready), "--schema-registry-port", "none"]
    log = open(data_dir.parent / "broker.log", "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + 120
    while not (ready.exists() and ready.read_text().startswith("bootstrap.servers=")):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"broker did not start: {(data_dir.parent / 'broker.log').read_text()[-2000:]}")
        time.sleep(0.1)
    return proc, ready.read_text().strip().split("=", 1)[1]


def produce_to_each(bootstrap: str, topics: int, per_topic: int, written: int, idempotent: bool) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": idempotent})
    deadline = time.monotonic() + 300
    for i in range(written):
        topic, partition = f"t{i % topics}", i // topics % per_topic
        while True:
            try:
                producer.produce(topic, b"x" * 100, partition=partition)
                break
            except KafkaException as exc:  # metadata of a just-created topic not there yet, or queue full
                if time.monotonic() > deadline:
                    raise SystemExit(f"could not produce to {topic}-{partition}: {exc}") from exc
                producer.poll(0.1)
    if producer.flush(120):
        raise SystemExit("records left unacknowledged")


def timed_stop(proc: subprocess.Popen[bytes], profile: str | None, py_spy: str) -> float:
    profiler = None
    if profile:  # py-spy on the broker for the stop only: where a stop's time goes
        profiler = subprocess.Popen([py_spy, "record", "--idle", "--threads", "--format", "raw",
                                     "-o", profile, "--pid", str(proc.pid)])
        time.sleep(1)  # py-spy attaches
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=300)
    took = time.monotonic() - started
    if profiler is not None:
        profiler.wait(timeout=60)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--written", type=int, default=None,
                        help="partitions that get a record before the stop (default all: logs open on first write)")
    parser.add_argument("--restart", action="store_true",
                        help="then start the broker again on the same logs, write to them again and time that "
                             "stop too (logs loaded at start, as on a broker that has been running)")
    parser.add_argument("--idempotent", action="store_true",
                        help="an idempotent producer: every written log then has producer state to snapshot (a plain "
                             "producer's logs have none, and a clean stop writes them no snapshot, as Kafka's rule)")
    parser.add_argument("--profile", help="write a py-spy raw (collapsed) profile of the (last) stop to this file")
    parser.add_argument("--py-spy", default="py-spy", help="the py-spy executable (not a project dependency)")
    args = parser.parse_args()
    written = args.partitions if args.written is None else args.written
    topics = args.partitions // args.per_topic
    with tempfile.TemporaryDirectory(prefix="clean-stop-") as tmp:
        data_dir = Path(tmp) / "data"
        log_dir = data_dir / "broker-0"
        rounds = ["new logs", "loaded logs"] if args.restart else ["new logs"]
        for n, what in enumerate(rounds):
            proc, bootstrap = start(data_dir)
            try:
                if n == 0:
                    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
                    new = [NewTopic(f"t{i}", args.per_topic, 1) for i in range(topics)]
                    for future in admin.create_topics(new, operation_timeout=120, request_timeout=120).values():
                        future.result()
                produce_to_each(bootstrap, topics, args.per_topic, written, args.idempotent)
                deadline = time.monotonic() + 300  # leaders create their logs as LeaderAndIsr reaches them
                while (logs := sum(1 for p in log_dir.iterdir() if p.is_dir())) < args.partitions:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                took = timed_stop(proc, args.profile if n == len(rounds) - 1 else None, args.py_spy)
            finally:
                if proc.poll() is None:
                    proc.kill()
            marker = (log_dir / ".kafka_cleanshutdown").exists()
            producer = "idempotent" if args.idempotent else "plain"
            print(f"{what}: {logs} logs ({written} written, {producer} producer): SIGTERM to exit {took:.2f} s, "
                  f"exit code {proc.returncode}, clean-shutdown marker {'written' if marker else 'MISSING'}")


if __name__ == "__main__":
    main()
