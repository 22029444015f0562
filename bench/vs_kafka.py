"""odradek beside Apache Kafka on the same machine, in one run: each row has Kafka's number, odradek's and the ratio.

Systems, each on 127.0.0.1 free ports with the same client (confluent-kafka) and the same broker settings:
- ``odradek``: ``odradek broker`` processes (one per broker, as Kafka runs one JVM per broker) on a throwaway
  ZooKeeper, from this checkout's ``src`` (or ``--src``);
- ``kafka-3.9.2``: Apache Kafka 3.9.2 in ZooKeeper mode on its own throwaway ZooKeeper;
- ``kafka-4.4.0``: the newest 4.x in KRaft combined mode.
Kafka's jars come from ``make jars`` (``odradek.apache_kafka``); brokers get a 1 GiB heap and the full JIT, as
Kafka's own scripts give them.

Phases (``--phases``), each run for every system in turn, the order rotated each repetition (``--repeat``):
- ``startup``: process start to the first acknowledged record (acks=all) on a new topic, one broker;
- ``memory``: resident memory of the broker processes, idle and with ``--memory-partitions`` partitions holding one
  record each (one broker);
- ``throughput``: produce then consume MB/s of 1 KiB records (linger.ms=5, batch.size 1 MiB, acks=1) at each
  ``--partitions`` count, one broker, RF 1;
- ``small``: 100-byte records at linger.ms=0, records/s: acks=1 RF 1 on one broker, acks=all RF 3 on three;
- ``latency``: acks=all RF 3 ack latency p50/p99 at rising rates (``--rates``) on three brokers, until a system
  falls short of the offered rate;
- ``leadership``: three brokers, ``--leadership-partitions`` partitions RF 3: a controlled shutdown (SIGTERM) of a
  broker that is not the controller (time until its process exits, and until it leads nothing), then the controller
  killed (time until every partition it led has a live leader). ZooKeeper sessions expire after 6 s on both sides.

    .venv/bin/python bench/vs_kafka.py [--systems odradek,kafka-3.9.2,kafka-4.4.0] [--phases ...]
        [--partitions 1,8,1000,10000] [--messages 100000] [--repeat 1] [--src DIR]

It prints markdown tables (the median over repetitions; ratio = odradek / Kafka 3.9, inverted for costs so that a
ratio above 1 always favours odradek) with the machine, the versions and the load
average at the start of each phase.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.apache_kafka import KafkaCluster, jvm
from odradek.coordination.localzk import LocalZooKeeper
from odradek.lab.processes import wait_until

KAFKA_3, KAFKA_4 = "kafka-3.9.2", "kafka-4.4.0"
SYSTEMS = ("odradek", KAFKA_3, KAFKA_4)
SESSION_MS = 6000
QUIET = {"log_level": 2}
"""librdkafka's own log lines at CRITICAL only: a client still collected after its cluster stopped would print a
reconnect failure every second into the tables."""


def rss_mb(pids: list[int]) -> float:
    """Resident memory of the processes, in MiB (VmRSS from /proc)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")


@dataclass
class Running:
    """A started cluster: where clients connect, each broker's pid by id, and how to act on one broker."""

    bootstrap: str
    pids: dict[int, int]
    terminate: Callable[[int], None]
    kill: Callable[[int], None]
    controller: Callable[[], int]
    stopped: Callable[[int], bool]
    extra: dict[str, object] = field(default_factory=dict)


def _started(ready: Path, proc: subprocess.Popen[bytes]) -> Callable[[], bool]:
    return lambda: ready.exists() or proc.poll() is not None


@contextlib.contextmanager
def odradek_cluster(n: int, src: str | None, tmp: Path) -> Iterator[Running]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(Path(src).resolve() if src else Path(__file__).resolve().parents[1] / "src")
    overrides = {"num.partitions": 1, "offsets.topic.replication.factor": min(3, n),
                 "transaction.state.log.replication.factor": min(3, n), "transaction.state.log.min.isr": min(2, n),
                 "group.initial.rebalance.delay.ms": 0, "zookeeper.session.timeout.ms": SESSION_MS}
    with LocalZooKeeper(tmp / "zookeeper") as zk:
        procs: dict[int, subprocess.Popen[bytes]] = {}
        try:
            for i in range(1, n + 1):
                cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(i), "--zookeeper",
                       f"{zk.hosts}/odradek", "--port", "0", "--data-dir", str(tmp / f"data-{i}"),
                       "--ready-file", str(tmp / f"ready-{i}"), "--log-level", "WARNING",
                       *(a for k, v in overrides.items() for a in ("--override", f"{k}={v}"))]
                with open(tmp / f"broker-{i}.log", "wb") as log:
                    procs[i] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
            for i, proc in procs.items():
                wait_until(_started(tmp / f"ready-{i}", proc), 300, f"odradek broker {i}")
                if procs[i].poll() is not None:
                    raise RuntimeError(f"odradek broker {i} exited: {(tmp / f'broker-{i}.log').read_text()[-2000:]}")
            bootstrap = ",".join((tmp / f"ready-{i}").read_text().split()[0].split("=", 1)[1] for i in procs)
            admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
            yield Running(bootstrap, {i: p.pid for i, p in procs.items()},
                          terminate=lambda i: procs[i].send_signal(signal.SIGTERM),
                          kill=lambda i: procs[i].kill(),
                          controller=lambda: int(admin.describe_cluster().result(30).controller.id),
                          stopped=lambda i: procs[i].poll() is not None)
        finally:
            for p in procs.values():
                p.kill()
            for p in procs.values():
                p.wait(30)


def _kraft_leader(version: str, bootstrap: str) -> int:
    """The active KRaft controller's id, as ``kafka-metadata-quorum describe --status`` prints it."""
    out = jvm.run_tool(version, "org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", bootstrap,
                       "describe", "--status", timeout=120, check=True).stdout
    match = re.search(r"LeaderId:\s+(\d+)", out)
    if match is None:
        raise RuntimeError(f"no LeaderId in kafka-metadata-quorum's answer: {out}")
    return int(match.group(1))


@contextlib.contextmanager
def kafka_cluster(version: str, n: int, tmp: Path) -> Iterator[Running]:
    overrides = {"zookeeper.session.timeout.ms": SESSION_MS} if version.startswith("3.") else {}
    cluster = KafkaCluster(tmp / "kafka", version=version, brokers=n, overrides=overrides, heap_mb=1024,
                           quick_start=False, start_deadline_s=300)
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, **QUIET})
        brokers = {b.node_id: b for b in cluster.brokers}

        def controller() -> int:
            if cluster.kraft:
                return _kraft_leader(version, cluster.bootstrap_servers)
            return int(admin.describe_cluster().result(30).controller.id)

        def pid(node: int) -> int:
            proc = brokers[node].proc
            assert proc is not None
            return proc.pid

        yield Running(cluster.bootstrap_servers, {i: pid(i) for i in brokers},
                      terminate=lambda i: os.kill(pid(i), signal.SIGTERM),
                      kill=lambda i: brokers[i].kill(),
                      controller=controller,
                      stopped=lambda i: not brokers[i].running())


@contextlib.contextmanager
def start(system: str, n: int, src: str | None) -> Iterator[Running]:
    with tempfile.TemporaryDirectory(prefix=f"vs-kafka-{system}-") as tmp:
        if system == "odradek":
            with odradek_cluster(n, src, Path(tmp)) as running:
                yield running
        else:
            with kafka_cluster(system.removeprefix("kafka-"), n, Path(tmp)) as running:
                yield running


def create_topic(bootstrap: str, topic: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(topic, partitions, rf)], operation_timeout=300,
                        request_timeout=300)[topic].result(600)

    def led() -> bool:  # every partition has a leader the clients see
        meta = admin.list_topics(topic, timeout=60).topics.get(topic)
        return meta is not None and len(meta.partitions) == partitions and all(
            p.leader >= 0 for p in meta.partitions.values())

    wait_until(led, 600, f"{topic}'s leaders", interval=0.2)


def produce(bootstrap: str, topic: str, count: int, value: bytes, acks: str, linger_ms: int,
            partitions: int) -> float:
    """Seconds to produce ``count`` records round-robin over the partitions and have them all acknowledged."""
    producer = Producer({**QUIET, "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": linger_ms,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20,
                         "queue.buffering.max.messages": 1_000_000})
    errors: list[object] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    producer.produce(topic, value, partition=0)
    producer.flush(60)  # metadata and connections ready before the clock starts
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(600) != 0:
        raise RuntimeError("records left unacknowledged")
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} records failed, first: {errors[0]}")
    return elapsed


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    """Seconds for one consumer assigned every partition to read ``expected`` records from the start."""
    consumer = Consumer({**QUIET, "bootstrap.servers": bootstrap, "group.id": f"vs-{topic}",
                         "enable.auto.commit": False, "fetch.max.bytes": 50 << 20,
                         "max.partition.fetch.bytes": 1 << 20})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = 0
        started = time.perf_counter()
        deadline = time.monotonic() + 600
        while got < expected and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if not msg.error():
                    got += 1
        if got < expected:
            raise RuntimeError(f"read {got} of {expected} records")
        return time.perf_counter() - started
    finally:
        consumer.close()


# ---- phases: each takes (system, src, args) and returns {row name: value}


def phase_startup(system: str, src: str | None, args: argparse.Namespace) -> dict[str, float]:
    started = time.perf_counter()
    with start(system, 1, src) as running:
        create_topic(running.bootstrap, "first", 1, 1)
        producer = Producer({**QUIET, "bootstrap.servers": running.bootstrap, "acks": "all", "linger.ms": 0})
        producer.produce("first", b"hello")
        if producer.flush(120) != 0:
            raise RuntimeError("the first record was not acknowledged")
        return {"start to first acknowledged record (s)": time.perf_counter() - started}


def phase_memory(system: str, src: str | None, args: argparse.Namespace) -> dict[str, float]:
    with start(system, 1, src) as running:
        time.sleep(5)  # a bench, not a test: let start-up garbage settle before reading RSS
        idle = rss_mb(list(running.pids.values()))
        n = args.memory_partitions
        create_topic(running.bootstrap, "mem", n, 1)
        producer = Producer({**QUIET, "bootstrap.servers": running.bootstrap, "linger.ms": 5})
        for p in range(n):
            producer.produce("mem", b"x" * 100, partition=p)
            producer.poll(0)
        producer.flush(300)
        time.sleep(5)
        return {"RSS idle (MiB)": idle, f"RSS with {n:,} partitions (MiB)": rss_mb(list(running.pids.values()))}


def phase_throughput(system: str, src: str | None, args: argparse.Namespace) -> dict[str, float]:
    rows: dict[str, float] = {}
    value = b"x" * 1024
    with start(system, 1, src) as running:
        for partitions in args.partitions:
            topic = f"tp-{partitions}"
            create_topic(running.bootstrap, topic, partitions, 1)
            count = args.messages
            secs = produce(running.bootstrap, topic, count, value, "1", 5, partitions)
            rows[f"produce MB/s, 1 KiB, {partitions:,} partitions"] = count * len(value) / secs / 1e6
            secs = consume(running.bootstrap, topic, partitions, count + 1)
            rows[f"consume MB/s, 1 KiB, {partitions:,} partitions"] = (count + 1) * len(value) / secs / 1e6
    return rows


def phase_small(system: str, src: str | None, args: argparse.Namespace) -> dict[str, float]:
    rows: dict[str, float] = {}
    count = args.small_messages
    with start(system, 1, src) as running:
        create_topic(running.bootstrap, "small", 1, 1)
        secs = produce(running.bootstrap, "small", count, b"x" * 100, "1", 0, 1)
        rows["100 B records/s, linger.ms=0, acks=1, RF 1"] = count / secs
    with start(system, 3, src) as running:
        create_topic(running.bootstrap, "small3", 1, 3)
        secs = produce(running.bootstrap, "small3", count, b"x" * 100, "all", 0, 1)
        rows["100 B records/s, linger.ms=0, acks=all, RF 3"] = count / secs
    return rows


def paced(bootstrap: str, topic: str, rate: int, seconds: float) -> tuple[list[float], int]:
    """Ack latencies (ms) of 1 KiB records sent at ``rate`` per second with acks=all, and how many were offered."""
    producer = Producer({**QUIET, "bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce(topic, b"warm")
    producer.flush(60)
    acks: list[float] = []
    total = int(rate * seconds)
    pad = b"x" * 1024
    started = time.perf_counter()
    for i in range(total):
        due = started + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(max(0.0, min(due - now, 0.001)))
        producer.produce(topic, pad, on_delivery=_ack_timer(acks, time.perf_counter()))
        producer.poll(0)
    producer.flush(120)
    return acks, total


def _ack_timer(acks: list[float], sent: float) -> Callable[[object, object], None]:
    def delivered(err: object, _msg: object) -> None:
        if err is None:
            acks.append((time.perf_counter() - sent) * 1000)
    return delivered


def phase_latency(system: str, src: str | None, args: argparse.Namespace) -> dict[str, float]:
    rows: dict[str, float] = {}
    with start(system, 3, src) as running:
        sustained = 0
        for rate in args.rates:
            topic = f"lat-{rate}"
            create_topic(running.bootstrap, topic, 1, 3)
            started = time.perf_counter()
            acks, offered = paced(running.bootstrap, topic, rate, args.latency_seconds)
            achieved = len(acks) / (time.perf_counter() - started)
            rows[f"acks=all RF 3 at {rate}/s: p50 ack (ms)"] = pct(acks, .5)
            rows[f"acks=all RF 3 at {rate}/s: p99 ack (ms)"] = pct(acks, .99)
            if len(acks) < offered or achieved < 0.9 * rate:  # saturated: higher rates say nothing more
                break
            sustained = rate
        rows["acks=all RF 3: highest rate sustained (records/s)"] = sustained
    return rows


def _leaders(admin: AdminClient, topic: str) -> dict[int, int]:
    meta = admin.list_topics(topic, timeout=60).topics[topic]
    return {p.id: p.leader for p in meta.partitions.values()}


def phase_leadership(system: str, src: str | None, args: argparse.Namespace) -> dict[str, float]:
    rows: dict[str, float] = {}
    n = args.leadership_partitions
    with start(system, 3, src) as running:
        create_topic(running.bootstrap, "lead", n, 3)
        controller = running.controller()
        victim = next(i for i in sorted(running.pids) if i != controller)
        survivors = ",".join(a for a in running.bootstrap.split(",")
                             if a != running.bootstrap.split(",")[sorted(running.pids).index(victim)])
        admin = AdminClient({"bootstrap.servers": survivors, **QUIET})
        started = time.perf_counter()
        running.terminate(victim)
        wait_until(lambda: running.stopped(victim), 900, "the controlled shutdown", interval=0.1)
        rows[f"controlled shutdown, {n:,} partitions: process exit (s)"] = time.perf_counter() - started
        wait_until(lambda: victim not in _leaders(admin, "lead").values(), 900, "leaders off the stopped broker",
                   interval=0.2)
        rows[f"controlled shutdown, {n:,} partitions: leaders moved (s)"] = time.perf_counter() - started
        led = [p for p, leader in _leaders(admin, "lead").items() if leader == controller]
        started = time.perf_counter()
        running.kill(controller)

        def moved() -> bool:
            leaders = _leaders(admin, "lead")
            return all(leaders[p] not in (controller, -1) for p in led)

        wait_until(moved, 900, "leaders off the killed controller", interval=0.2)
        rows[f"controller killed, {n:,} partitions: the ones it led led again (s)"] = time.perf_counter() - started
    return rows


PHASES: dict[str, Callable[[str, str | None, argparse.Namespace], dict[str, float]]] = {
    "startup": phase_startup, "memory": phase_memory, "throughput": phase_throughput, "small": phase_small,
    "latency": phase_latency, "leadership": phase_leadership,
}
COSTS = ("(s)", "(ms)", "(MiB)")
"""A row whose name ends so is a cost: its ratio is Kafka's over odradek's, so that above 1 favours odradek."""


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--partitions", type=_ints, default=[1, 8, 1000, 10000])
    ap.add_argument("--messages", type=int, default=100_000, help="1 KiB records per throughput case")
    ap.add_argument("--small-messages", type=int, default=100_000)
    ap.add_argument("--rates", type=_ints, default=[250, 500, 1000, 2000, 4000, 8000])
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--memory-partitions", type=int, default=10_000)
    ap.add_argument("--leadership-partitions", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--src", help="run odradek from this src directory")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # brokers stopped by the context managers, not orphaned
    systems = args.systems.split(",")
    print(f"# {platform.node()}: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# java: {subprocess.run(['java', '-version'], capture_output=True, text=True).stderr.splitlines()[0]}")
    for name in args.phases.split(","):
        run = PHASES[name]
        results: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        loads = []
        for rep in range(args.repeat):
            order = systems[rep % len(systems):] + systems[:rep % len(systems)]
            for system in order:
                loads.append(os.getloadavg()[0])
                try:
                    for row, value in run(system, args.src, args).items():
                        results[row][system].append(value)
                except (RuntimeError, TimeoutError, KafkaException, subprocess.SubprocessError) as exc:
                    print(f"# {name} on {system} failed: {exc}", flush=True)
        print(f"\n### {name} (median of {args.repeat}; load average {min(loads):.1f}-{max(loads):.1f}; ratio: "
              "odradek / Kafka 3.9 for rates, Kafka 3.9 / odradek for times and memory, above 1 favours odradek)\n")
        print("| | " + " | ".join(systems) + " | ratio |")
        print("|---|" + "---:|" * (len(systems) + 1))
        for row, by_system in results.items():
            medians = {s: statistics.median(v) for s, v in by_system.items() if v}
            cells = [f"{medians[s]:,.2f}" if s in medians else "-" for s in systems]
            ratio = "-"
            if "odradek" in medians and KAFKA_3 in medians and medians["odradek"] and medians[KAFKA_3]:
                r = medians["odradek"] / medians[KAFKA_3]
                ratio = f"{1 / r if row.endswith(COSTS) else r:.2f}"
            print(f"| {row} | " + " | ".join(cells) + f" | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
