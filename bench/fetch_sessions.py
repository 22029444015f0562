"""Follower fetch cost at 10,000 partitions with and without incremental fetch sessions (KIP-227), side by side.

Two ``odradek broker`` processes on a private ZooKeeper; one topic of ``--partitions`` partitions at RF 2, all led by
broker 0 and followed by broker 1, so broker 0's CPU is the leader's side of replication and broker 1's the
follower's. The topic is mostly idle: a confluent-kafka producer trickles ``--rate`` 100-byte records/s (acks=1)
to random partitions, which is what wakes the follower's parked fetches. Over a ``--seconds`` window the bench
reads each broker's CPU seconds (utime + stime from /proc) and, from the leader's ``/metrics``, the Fetch requests
it answered and their request and response bytes.

The switch is Kafka's: ``max.incremental.fetch.session.cache.slots=0`` on the brokers turns sessions off (the
follower's full fetches then never get a session id), the default 1000 leaves them on. The topic is created once;
for each variant both brokers restart on the same logs with that setting (follower stopped first, leader started
first, so broker 0 leads everything again). Both variants run in one invocation, back to back, ``--repeat`` times,
since this machine is shared and noisy.

    PYTHONPATH=src .venv/bin/python bench/fetch_sessions.py [--partitions 10000] [--seconds 20] [--rate 20]
        [--repeat 2] [--src DIR]

``--src`` runs the brokers from another checkout's ``src``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from odradek.admin import CREATE_TOPICS, metadata, request_schema
from odradek.client import KafkaConnection
from odradek.coordination.localzk import LocalZooKeeper

TOPIC = "idle"
LOG_LEVEL = os.environ.get("ODRADEK_BENCH_BROKER_LOG_LEVEL", "WARNING")
VARIANTS = (("sessions", "1000"), ("no sessions", "0"))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def scrape(port: int) -> dict[str, float]:
    """The leader's Fetch counters from its /metrics page."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out: dict[str, float] = {}
    for name in ("requests_total", "requestbytes_total", "responsebytes_total"):
        m = re.search(rf'^kafka_network_requestmetrics_{name}{{request="Fetch"}} (\S+)$', text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


class Pair:
    """Brokers 0 and 1 on ``zk`` under their own chroot, from ``src``."""

    def __init__(self, base: Path, zk: LocalZooKeeper, chroot: str, slots: str, src: str | None) -> None:
        self.base = base
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.ports: dict[int, int] = {}
        self.metrics: dict[int, int] = {}
        env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()) if src else os.environ.get("PYTHONPATH", ""))
        try:
            for b in (0, 1):
                self._start(b, zk, chroot, slots, env)
        except BaseException:
            self.close()
            raise
        self.bootstrap = f"127.0.0.1:{self.ports[0]}"

    def _start(self, b: int, zk: LocalZooKeeper, chroot: str, slots: str, env: dict[str, str]) -> None:
        base = self.base
        ready = base / f"b{b}.ready"
        ready.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(b), "--zookeeper", f"{zk.hosts}/{chroot}",
               "--port", "0", "--data-dir", str(base / f"broker-{b}"), "--ready-file", str(ready),
               "--log-level", LOG_LEVEL, "--metrics-port", "0"]
        for k, v in {"max.incremental.fetch.session.cache.slots": slots, "zookeeper.session.timeout.ms": "30000",
                     "replica.lag.time.max.ms": "60000", "auto.leader.rebalance.enable": "false"}.items():
            cmd += ["--override", f"{k}={v}"]
        with open(base / f"b{b}.log", "ab") as log:
            self.procs[b] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 300
        while not ready.exists() or not ready.read_text().strip():
            if time.monotonic() > deadline or self.procs[b].poll() is not None:
                raise RuntimeError(f"broker {b} did not start:\n{(base / f'b{b}.log').read_text()[-3000:]}")
            time.sleep(0.05)
        m = re.match(r"bootstrap.servers=\S+:(\d+) metrics=http://\S+:(\d+)/metrics", ready.read_text().strip())
        assert m is not None, ready.read_text()
        self.ports[b], self.metrics[b] = int(m.group(1)), int(m.group(2))

    def create(self, partitions: int) -> None:
        with KafkaConnection(self.bootstrap, timeout=900) as conn:
            version, cls, mod = request_schema(conn, CREATE_TOPICS, 7)
            assignments = tuple(mod.CreatableReplicaAssignment(partition_index=p, broker_ids=(0, 1))
                                for p in range(partitions))
            topic = mod.CreatableTopic(name=TOPIC, num_partitions=-1, replication_factor=-1,
                                       assignments=assignments, configs=())
            conn.request(CREATE_TOPICS, cls(topics=(topic,), timeout=datetime.timedelta(seconds=600),
                                            validate_only=False), version)
        self.settle(partitions)

    def settle(self, partitions: int) -> None:
        """Wait until broker 0 leads every partition with both replicas in its ISR."""
        deadline = time.monotonic() + 1800
        while True:
            try:
                with KafkaConnection(self.bootstrap, timeout=120) as conn:
                    parts = [p for t in metadata(conn, [TOPIC]).topics for p in t.partitions]
                if len(parts) == partitions and all(p.leader_id == 0 and len(p.isr_nodes) == 2 for p in parts):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the topic never had both replicas in every ISR")
            time.sleep(1.0)

    def stop(self) -> None:
        """SIGTERM the follower, then the leader: the leader keeps every leadership (nobody to hand it to) and
        starts leading them all again when it comes back first; the follower rejoins the ISRs after it."""
        for b in (1, 0):
            proc = self.procs[b]
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(600)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(60)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(60)


def trickle(bootstrap: str, partitions: int, rate: int, stop: threading.Event, delivered: list[int]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})

    def done(err: object, _msg: object) -> None:
        if err is None:
            delivered[0] += 1

    rng = random.Random(1)
    interval = 1.0 / rate
    next_at = time.perf_counter()
    while not stop.is_set():
        p.produce(TOPIC, b"x" * 100, partition=rng.randrange(partitions), on_delivery=done)
        p.poll(0)
        next_at += interval
        time.sleep(max(0.0, next_at - time.perf_counter()))
    p.flush(30)


def measure(pair: Pair, partitions: int, rate: int, seconds: float, warmup: float) -> dict[str, float]:
    stop = threading.Event()
    delivered = [0]
    t = threading.Thread(target=trickle, args=(pair.bootstrap, partitions, rate, stop, delivered), daemon=True)
    t.start()
    try:
        # a broker that just created thousands of logs may stall for a while: start once fetches flow again
        first = scrape(pair.metrics[0])["requests_total"]
        deadline = time.monotonic() + 600
        while scrape(pair.metrics[0])["requests_total"] < first + 3:
            if time.monotonic() > deadline:
                raise TimeoutError("the follower does not fetch")
            time.sleep(0.5)
        time.sleep(warmup)
        cpu0 = {b: cpu_seconds(p.pid) for b, p in pair.procs.items()}
        delivered0 = delivered[0]
        m0 = scrape(pair.metrics[0])
        began = time.perf_counter()
        time.sleep(seconds)
        elapsed = time.perf_counter() - began
        cpu1 = {b: cpu_seconds(p.pid) for b, p in pair.procs.items()}
        records = delivered[0] - delivered0
        m1 = scrape(pair.metrics[0])
    finally:
        stop.set()
        t.join(60)
    fetches = m1["requests_total"] - m0["requests_total"]
    return {
        "seconds": elapsed,
        "leader_cpu": cpu1[0] - cpu0[0],
        "follower_cpu": cpu1[1] - cpu0[1],
        "fetches": fetches,
        "records": records,
        "request_bytes": (m1["requestbytes_total"] - m0["requestbytes_total"]) / max(fetches, 1),
        "response_bytes": (m1["responsebytes_total"] - m0["responsebytes_total"]) / max(fetches, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--rate", type=int, default=20, help="records/s trickled to random partitions")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--src", help="run the brokers from this src dir")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' directories and logs")
    ap.add_argument("--only", choices=[name for name, _ in VARIANTS], help="run one variant")
    args = ap.parse_args()
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"{args.partitions} partitions RF 2 (leader broker 0, follower broker 1), {args.rate} records/s, "
          f"{args.seconds:.0f} s windows after {args.warmup:.0f} s", flush=True)
    base = Path(tempfile.mkdtemp(prefix="bench-fetch-sessions-"))
    zk = LocalZooKeeper(base / "zk", quick_start=False).start()
    rows: list[tuple[str, dict[str, Any]]] = []
    try:
        began = time.perf_counter()
        pair = Pair(base, zk, "bench", "1000", args.src)
        try:
            pair.create(args.partitions)
            pair.stop()
        finally:
            pair.close()
        print(f"topic created in {time.perf_counter() - began:.0f} s", flush=True)
        for _ in range(args.repeat):
            for name, slots in VARIANTS:
                if args.only and name != args.only:
                    continue
                began = time.perf_counter()
                pair = Pair(base, zk, "bench", slots, args.src)  # the same logs, restarted with this config
                try:
                    pair.settle(args.partitions)
                    ready_s = time.perf_counter() - began
                    r = measure(pair, args.partitions, args.rate, args.seconds, args.warmup)
                    pair.stop()
                finally:
                    pair.close()
                rows.append((name, r))
                print(f"{name:12s} leader {r['leader_cpu'] / r['seconds']:.3f} CPU-s/s, follower "
                      f"{r['follower_cpu'] / r['seconds']:.3f} CPU-s/s, {r['fetches'] / r['seconds']:.1f} fetches/s, "
                      f"{r['records'] / r['seconds']:.1f} records/s delivered, "
                      f"{r['request_bytes']:.0f} B/request, {r['response_bytes']:.0f} B/response "
                      f"(restarted and settled in {ready_s:.0f} s; load average {os.getloadavg()[0]:.1f})",
                      flush=True)
    finally:
        zk.stop()
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print("\n| variant | leader CPU s/s | follower CPU s/s | fetches/s | bytes/request | bytes/response |")
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        s = r["seconds"]
        print(f"| {name} | {r['leader_cpu'] / s:.3f} | {r['follower_cpu'] / s:.3f} | {r['fetches'] / s:.1f} | "
              f"{r['request_bytes']:.0f} | {r['response_bytes']:.0f} |")


if __name__ == "__main__":
    main()
