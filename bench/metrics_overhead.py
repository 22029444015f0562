"""What metrics cost: produce throughput with and without ``--metrics-port`` (scraped every second meanwhile), and
how long a scrape and the console's JSON take on a cluster with many partitions.

Each round starts a fresh ``odradek up`` process (one broker, or three for the scrape cost), produces the same load
as bench/produce_consume.py (1 KiB values, linger.ms=5, acks=1, 8 partitions) with confluent-kafka, and rounds
alternate off/on so the shared machine's drift falls on both sides.

    .venv/bin/python bench/metrics_overhead.py [--messages 200000] [--rounds 3] [--partitions 3000] \
        [--baseline-src DIR]   # DIR/src from `git archive e85b04f src | tar -x -C DIR`: the code before metrics
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

VALUE = b"x" * 1024


@contextlib.contextmanager
def odradek(brokers: int, metrics: bool, kill: bool = False, src: str | None = None
            ) -> Iterator[tuple[str, list[str], int]]:
    """``src``: run the broker from that source tree instead (the code before metrics, for a baseline)."""
    tmp = tempfile.mkdtemp(prefix="bench-metrics-")
    ready = Path(tmp, "ready")
    cmd = [sys.executable, "-m", "odradek", "up", "--brokers", str(brokers), "--port", "0", "--data-dir",
           f"{tmp}/data", "--ready-file", str(ready), "--log-level", "WARNING", "--schema-registry-port", "none"]
    if metrics:
        cmd += ["--metrics-port", "0"]
    env = dict(os.environ, PYTHONPATH=src) if src else None
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text().strip()):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("odradek did not start")
            time.sleep(0.05)
        fields = dict(part.split("=", 1) for part in ready.read_text().split())
        urls = fields["metrics"].split(",") if "metrics" in fields else []
        yield fields["bootstrap.servers"], urls, proc.pid
    finally:
        if kill:
            proc.kill()  # a clean stop of 9,000 logs flushes each one: not what this measures
        else:
            proc.terminate()
        proc.wait(300)


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process has used (Linux /proc), which other load on the machine barely moves."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, topic: str, messages: int) -> float:
    """Messages per second for ``messages`` 1 KiB records, acks=1."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1,
                         "queue.buffering.max.messages": 1_000_000})
    producer.produce(topic, VALUE)
    producer.flush(30)  # metadata and connections warm
    began = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return messages / (time.perf_counter() - began)


def create(bootstrap: str, topic: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, rf)])[topic].result(120)


def timed_get(url: str) -> tuple[float, int]:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
    return time.perf_counter() - began, len(body)


MODES = ("before", "off", "on")
"""before: the broker without this work (``--baseline-src``); off: with it, no --metrics-port (the counters still
count); on: --metrics-port, scraped every second."""


def throughput(messages: int, rounds: int, baseline_src: str | None) -> None:
    modes = MODES if baseline_src else MODES[1:]
    results: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    scrapes: list[float] = []
    for round_ in range(rounds):
        order = modes[round_ % len(modes):] + modes[:round_ % len(modes)]  # rotate: drift falls on every mode
        for mode in order:
            metrics = mode == "on"
            with odradek(1, metrics, src=baseline_src if mode == "before" else None) as (bootstrap, urls, pid):
                create(bootstrap, "bench", 8, 1)
                stop = threading.Event()

                def scraper(urls: list[str] = urls, stop: threading.Event = stop) -> None:
                    while not stop.wait(1.0):
                        scrapes.append(timed_get(urls[0])[0])

                thread = threading.Thread(target=scraper, daemon=True)
                if metrics:
                    thread.start()
                cpu_before = cpu_seconds(pid)
                rate = produce(bootstrap, "bench", messages)
                cpu[mode].append((cpu_seconds(pid) - cpu_before) / messages * 1e6)
                stop.set()
                if metrics:
                    thread.join()
                results[mode].append(rate)
                print(f"  {mode:6s}: {rate:,.0f} msg/s, broker CPU {cpu[mode][-1]:.2f} us/msg", flush=True)
    print(f"produce, 1 broker, {messages} x 1 KiB, acks=1, 8 partitions, {rounds} rounds (median):")
    for mode in modes:
        print(f"  {mode:6s}: {statistics.median(results[mode]):,.0f} msg/s, "
              f"broker CPU {statistics.median(cpu[mode]):.2f} us/msg")
    if scrapes:
        print(f"  scrape during the load: median {statistics.median(scrapes) * 1000:.1f} ms, "
              f"max {max(scrapes) * 1000:.1f} ms ({len(scrapes)} scrapes)")


def scrape_cost(partitions: int) -> None:
    with odradek(3, True, kill=True) as (bootstrap, urls, _pid):
        create(bootstrap, "wide", partitions, 3)
        time.sleep(10)  # the brokers open 3 x partitions logs and settle the ISRs first
        metrics = [timed_get(urls[0]) for _ in range(10)]
        console = [timed_get(urls[1].replace("/metrics", "/api/cluster")) for _ in range(10)]
        print(f"3 brokers, {partitions} partitions x RF 3 (+ 50 of __consumer_offsets), one process:")
        for what, times in (("/metrics", metrics), ("/api/cluster (every broker asked)", console)):
            print(f"  {what}: median {statistics.median(t for t, _ in times) * 1000:.1f} ms, "
                  f"min {min(t for t, _ in times) * 1000:.1f} ms, {times[0][1]:,} bytes")


def hot_path_cost() -> None:
    """What the counters add to one produce request of 8 partitions (1 request timed, 8 appends counted)."""
    from odradek.broker.stats import BrokerStats

    stats = BrokerStats()
    n = 200_000
    began = time.perf_counter()
    for _ in range(n):
        started = time.perf_counter()
        for _p in range(8):
            stats.appended("bench", 100, 104_857)
        stats.request_done(0, (time.perf_counter() - started) * 1000)
    per_request = (time.perf_counter() - began) / n
    print(f"hot path: {per_request * 1e6:.2f} us of counting per 8-partition produce request")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=3000)
    parser.add_argument("--baseline-src", default=None,
                        help="a source tree of odradek before metrics (git archive <commit> src | tar -x -C DIR)")
    args = parser.parse_args()
    hot_path_cost()
    throughput(args.messages, args.rounds, args.baseline_src)
    scrape_cost(args.partitions)


if __name__ == "__main__":
    main()
