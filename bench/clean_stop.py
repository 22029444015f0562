"""Clean stop of one broker holding many logs: SIGTERM to process exit.

A clean stop flushes every log, snapshots producer state, writes the offset checkpoints and the clean-shutdown
marker. The bench creates ``--partitions`` partitions on one broker (RF 1), produces one record to each
(a broker opens a log on its first write), then times SIGTERM to exit and checks that the marker
was written.

    .venv/bin/python bench/clean_stop.py                        # 10,000 partitions
    .venv/bin/python bench/clean_stop.py --partitions 1000
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

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def start(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = data_dir.parent / "ready"
    cmd = [sys.executable, "-m", "odradek", "up", "--port", "0", "--data-dir", str(data_dir),
           "--ready-file", str(ready)]
    log = open(data_dir.parent / "broker.log", "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + 120
    while not (ready.exists() and ready.read_text().startswith("bootstrap.servers=")):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"broker did not start: {(data_dir.parent / 'broker.log').read_text()[-2000:]}")
        time.sleep(0.1)
    return proc, ready.read_text().strip().split("=", 1)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--written", type=int, default=None,
                        help="partitions that get a record before the stop (default all: logs open on first write)")
    args = parser.parse_args()
    written = args.partitions if args.written is None else args.written
    with tempfile.TemporaryDirectory(prefix="clean-stop-") as tmp:
        data_dir = Path(tmp) / "data"
        proc, bootstrap = start(data_dir)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topics = [NewTopic(f"t{i}", args.partitions // args.per_topic, 1)
                      for i in range(args.partitions // args.per_topic)]
            for future in admin.create_topics(topics, operation_timeout=120, request_timeout=120).values():
                future.result()
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            for i in range(written):
                producer.produce(f"t{i % len(topics)}", b"x" * 100, partition=i // len(topics) % args.per_topic)
            producer.flush(60)
            log_dir = data_dir / "broker-0"
            deadline = time.monotonic() + 60  # leaders create their logs as LeaderAndIsr reaches them
            while (logs := sum(1 for p in log_dir.iterdir() if p.is_dir())) < args.partitions:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=300)
            took = time.monotonic() - started
        finally:
            if proc.poll() is None:
                proc.kill()
        marker = (log_dir / ".kafka_cleanshutdown").exists()
        print(f"{logs} logs ({written} written): SIGTERM to exit {took:.2f} s, "
              f"exit code {proc.returncode}, clean-shutdown marker {'written' if marker else 'MISSING'}")


if __name__ == "__main__":
    main()
