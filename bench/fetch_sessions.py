"""Follower fetch cost with and without incremental fetch sessions (KIP-227), measured side by side.

Four ``odradek broker`` processes on a private ZooKeeper form two leader/follower pairs. Pair A (brokers 0 and 1)
keeps Kafka's default ``max.incremental.fetch.session.cache.slots=1000``; pair B (brokers 2 and 3) runs with
``max.incremental.fetch.session.cache.slots=0``, Kafka's switch that turns sessions off (the leader never grants
one, so its follower's fetches stay full). Topic ``a`` has ``--partitions`` partitions at RF 2 all led by broker 0
and followed by broker 1; topic ``b`` the same on brokers 2 and 3. Both are mostly idle: a confluent-kafka
producer trickles ``--rate`` 100-byte records/s to random partitions of each topic (acks=1), which is what wakes
the followers' parked fetches.

Both variants are measured in the same ``--seconds`` windows, ``--repeat`` of them back to back, so the shared
machine's noise hits both alike: each broker's CPU seconds (utime + stime from /proc), and from each leader's
``/metrics`` the Fetch requests it answered with their request and response bytes.

    PYTHONPATH=src .venv/bin/python bench/fetch_sessions.py [--partitions 10000] [--seconds 20] [--rate 20]
        [--repeat 3] [--src DIR] [--baseline-src DIR]

``--src`` runs the brokers from another checkout's ``src``. ``--baseline-src`` compares two versions of the code
instead of sessions on and off: pair B keeps sessions on too and runs from that checkout's ``src`` (variant
"baseline"), so a change to the session path is measured side by side with the code before it. Creating the
topics dominates the run time (on the shared 2-CPU machine, minutes per thousand partitions).
"""

from __future__ import annotations

import argparse
import contextlib
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
from odradek.cli.cluster import controller_connection, elect_leaders
from odradek.client import KafkaConnection
from odradek.controller import PREFERRED
from odradek.coordination.localzk import LocalZooKeeper

LOG_LEVEL = os.environ.get("ODRADEK_BENCH_BROKER_LOG_LEVEL", "WARNING")
PAIRS = {"sessions": ("a", 0, 1, "1000"), "no sessions": ("b", 2, 3, "0")}
"""variant -> (topic, leader, follower, max.incremental.fetch.session.cache.slots of both)"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def scrape(port: int) -> dict[str, float]:
    """A leader's Fetch counters from its /metrics page."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60).read().decode()
    out: dict[str, float] = {}
    for name in ("requests_total", "requestbytes_total", "responsebytes_total"):
        m = re.search(rf'^kafka_network_requestmetrics_{name}{{request="Fetch"}} (\S+)$', text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


class Brokers:
    def __init__(self, base: Path, zk: LocalZooKeeper, src: str | None, baseline_src: str | None = None) -> None:
        self.base = base
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.ports: dict[int, int] = {}
        self.metrics: dict[int, int] = {}
        slots = {b: s for _t, leader, follower, s in PAIRS.values() for b in (leader, follower)}
        try:
            for b in sorted(slots):
                code = baseline_src if baseline_src and b in (2, 3) else src
                env = dict(os.environ,
                           PYTHONPATH=str(Path(code).resolve()) if code else os.environ.get("PYTHONPATH", ""))
                self._start(b, zk, slots[b], env)
        except BaseException:
            self.close()
            raise
        self.bootstrap = f"127.0.0.1:{self.ports[0]}"

    def _start(self, b: int, zk: LocalZooKeeper, slots: str, env: dict[str, str]) -> None:
        ready = self.base / f"b{b}.ready"
        cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(b), "--zookeeper", f"{zk.hosts}/bench",
               "--port", "0", "--data-dir", str(self.base / f"broker-{b}"), "--ready-file", str(ready),
               "--log-level", LOG_LEVEL, "--metrics-port", "0"]
        for k, v in {"max.incremental.fetch.session.cache.slots": slots, "zookeeper.session.timeout.ms": "30000",
                     "replica.lag.time.max.ms": "60000", "auto.leader.rebalance.enable": "false"}.items():
            cmd += ["--override", f"{k}={v}"]
        with open(self.base / f"b{b}.log", "ab") as log:
            self.procs[b] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 300
        while not ready.exists() or not ready.read_text().strip():
            if time.monotonic() > deadline or self.procs[b].poll() is not None:
                raise RuntimeError(f"broker {b} did not start:\n{(self.base / f'b{b}.log').read_text()[-3000:]}")
            time.sleep(0.05)
        m = re.match(r"bootstrap.servers=\S+:(\d+) metrics=http://\S+:(\d+)/metrics", ready.read_text().strip())
        assert m is not None, ready.read_text()
        self.ports[b], self.metrics[b] = int(m.group(1)), int(m.group(2))

    def create(self, partitions: int) -> None:
        """Both topics with explicit assignments; CreateTopics may outlast the client's patience on a loaded
        machine, so success is read from Metadata: every partition led by its pair's leader, both in the ISR."""
        with KafkaConnection(self.bootstrap, timeout=60) as conn:
            version, cls, mod = request_schema(conn, CREATE_TOPICS, 7)
            topics = tuple(
                mod.CreatableTopic(
                    name=topic, num_partitions=-1, replication_factor=-1, configs=(),
                    assignments=tuple(mod.CreatableReplicaAssignment(partition_index=p, broker_ids=(leader, follower))
                                      for p in range(partitions)),
                )
                for topic, leader, follower, _s in PAIRS.values()
            )
            with contextlib.suppress(TimeoutError):
                conn.request(CREATE_TOPICS, cls(topics=topics, timeout=datetime.timedelta(seconds=3600),
                                                validate_only=False), version)
        deadline = time.monotonic() + 3600
        leaders = {topic: leader for topic, leader, _f, _s in PAIRS.values()}
        while True:
            try:
                with KafkaConnection(self.bootstrap, timeout=120) as conn:
                    response = metadata(conn, list(leaders))
                parts = [(t.name, p) for t in response.topics for p in t.partitions]
                if len(parts) == 2 * partitions and all(len(p.isr_nodes) == 2 for _t, p in parts):
                    if all(p.leader_id == leaders[t] for t, p in parts):
                        return
                    # a broker whose session expired under the creation's load handed its leaderships over
                    with controller_connection(self.bootstrap) as conn:
                        elect_leaders(conn, PREFERRED, None)
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the topics never had both replicas in every ISR")
            time.sleep(2.0)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(60)


def trickle(bootstrap: str, partitions: int, rate: int, stop: threading.Event, delivered: dict[str, int]) -> None:
    """``rate`` records/s to random partitions of each topic."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})

    def done(err: Any, msg: Any) -> None:
        if err is None:
            delivered[msg.topic()] += 1

    rng = random.Random(1)
    interval = 1.0 / rate
    next_at = time.perf_counter()
    while not stop.is_set():
        for topic, _l, _f, _s in PAIRS.values():
            p.produce(topic, b"x" * 100, partition=rng.randrange(partitions), on_delivery=done)
        p.poll(0)
        next_at += interval
        time.sleep(max(0.0, next_at - time.perf_counter()))
    p.flush(30)


def window(brokers: Brokers, seconds: float, delivered: dict[str, int]) -> dict[str, dict[str, float]]:
    cpu0 = {b: cpu_seconds(p.pid) for b, p in brokers.procs.items()}
    m0 = {b: scrape(brokers.metrics[b]) for _t, b, _f, _s in PAIRS.values()}
    d0 = dict(delivered)
    began = time.perf_counter()
    time.sleep(seconds)
    elapsed = time.perf_counter() - began
    cpu1 = {b: cpu_seconds(p.pid) for b, p in brokers.procs.items()}
    m1 = {b: scrape(brokers.metrics[b]) for _t, b, _f, _s in PAIRS.values()}
    out = {}
    for name, (topic, leader, follower, _s) in PAIRS.items():
        fetches = m1[leader]["requests_total"] - m0[leader]["requests_total"]
        out[name] = {
            "leader_cpu": (cpu1[leader] - cpu0[leader]) / elapsed,
            "follower_cpu": (cpu1[follower] - cpu0[follower]) / elapsed,
            "fetches": fetches / elapsed,
            "records": (delivered[topic] - d0[topic]) / elapsed,
            "request_bytes": (m1[leader]["requestbytes_total"] - m0[leader]["requestbytes_total"]) / max(fetches, 1),
            "response_bytes": (m1[leader]["responsebytes_total"] - m0[leader]["responsebytes_total"])
            / max(fetches, 1),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=20, help="records/s trickled to random partitions of each topic")
    ap.add_argument("--repeat", type=int, default=3, help="measurement windows")
    ap.add_argument("--src", help="run the brokers from this src dir")
    ap.add_argument("--baseline-src", help="pair B keeps sessions on and runs from this src dir instead")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' directories and logs")
    args = ap.parse_args()
    if args.baseline_src:
        PAIRS.pop("no sessions")
        PAIRS["baseline"] = ("b", 2, 3, "1000")
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f}", flush=True)
    print(f"{args.partitions} partitions RF 2 per pair, {args.rate} records/s per topic, {args.repeat} windows of "
          f"{args.seconds:.0f} s", flush=True)
    base = Path(tempfile.mkdtemp(prefix="bench-fetch-sessions-"))
    zk = LocalZooKeeper(base / "zk", quick_start=False).start()
    rows: list[tuple[int, str, dict[str, float]]] = []
    try:
        brokers = Brokers(base, zk, args.src, args.baseline_src)
        stop = threading.Event()
        delivered = {topic: 0 for topic, _l, _f, _s in PAIRS.values()}
        t: threading.Thread | None = None
        try:
            began = time.perf_counter()
            brokers.create(args.partitions)
            print(f"topics ready in {time.perf_counter() - began:.0f} s", flush=True)
            t = threading.Thread(target=trickle, args=(brokers.bootstrap, args.partitions, args.rate, stop,
                                                       delivered), daemon=True)
            t.start()
            time.sleep(args.warmup)
            for i in range(args.repeat):
                for name, r in window(brokers, args.seconds, delivered).items():
                    rows.append((i + 1, name, r))
                    print(f"window {i + 1} {name:12s} leader {r['leader_cpu']:.3f} CPU-s/s "
                          f"({_per_fetch(r, 'leader_cpu')}), follower {r['follower_cpu']:.3f} CPU-s/s "
                          f"({_per_fetch(r, 'follower_cpu')}), {r['fetches']:.1f} fetches/s, {r['records']:.1f} "
                          f"records/s, {r['request_bytes']:.0f} B/request, {r['response_bytes']:.0f} B/response "
                          f"(load average {os.getloadavg()[0]:.1f})", flush=True)
        finally:
            stop.set()
            if t is not None:
                t.join(60)
            brokers.close()
    finally:
        zk.stop()
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print("\n| window | variant | leader CPU s/s | follower CPU s/s | fetches/s | leader ms/fetch | follower ms/fetch "
          "| records/s | bytes/request | bytes/response |\n|---|---|---|---|---|---|---|---|---|---|")
    for i, name, r in rows:
        print(f"| {i} | {name} | {r['leader_cpu']:.3f} | {r['follower_cpu']:.3f} | {r['fetches']:.1f} | "
              f"{_per_fetch(r, 'leader_cpu')} | {_per_fetch(r, 'follower_cpu')} | {r['records']:.1f} | "
              f"{r['request_bytes']:.0f} | {r['response_bytes']:.0f} |")


def _per_fetch(r: dict[str, float], key: str) -> str:
    return f"{1000 * r[key] / r['fetches']:.1f} ms/fetch" if r["fetches"] else "-"


if __name__ == "__main__":
    main()
