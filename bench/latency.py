"""Ack and end-to-end latency as a user sees them (issue 11): confluent-kafka, 1 KiB records paced at 500 msg/s.

Starts ``odradek up --brokers 3`` as a subprocess (port 0, ready file), then for each case (acks=all on an RF 3
topic; acks=1 on an RF 1 topic) produces with ``linger.ms=0`` while a consumer (``fetch.wait.max.ms=100``) reads
the same topic, and prints the ack latency (send to delivery callback) and the end-to-end latency (send to the
consumer's receipt; the send time travels in the record) as p50/p90/p99/max. That steady state is measured after a
warm-up; each case then also measures the first records of ``--new-topics`` new topics, sent as soon as each topic
is created (``--first`` records each): the first record's ack and end-to-end latency, and the worst of the first
records, which is what a test suite creating a topic per test pays.

    PYTHONPATH=src .venv/bin/python bench/latency.py [--rate 500] [--seconds 10] [--src DIR] [--processes]
        [-X enable.idempotence=true] [--new-topics 5] [--first 10]

Beside the percentiles it prints the brokers' CPU time per acknowledged record (user + system of the broker
process(es) over the case, from /proc), which stays comparable while other work loads the machine, and the load
average. ``--processes`` runs each broker in its own process (``odradek broker`` on a throwaway ZooKeeper) instead
of the three brokers of ``odradek up`` sharing one process and one GIL; ``ODRADEK_EVENT_LOOP=asyncio`` in the
environment runs the brokers on asyncio's own loop instead of uvloop.

``--src`` runs the broker from another checkout's ``src`` (a ``git worktree`` of a base commit), so before and
after can be measured in one invocation: ``--src /tmp/lat-base/src --src src``.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.coordination.localzk import LocalZooKeeper
from odradek.event_loop import ENV
from produce_consume import registry_off  # bench/ is the script's own directory, first on sys.path

RECORD = 1024


def _start(cmd: list[str], ready: Path, env: dict[str, str], cwd: str) -> subprocess.Popen[bytes]:
    with open(ready.with_suffix(".log"), "wb") as log:  # the broker's log lines stay in the temporary directory
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=cwd)
    deadline = time.monotonic() + 180  # a loaded machine can take a minute to import and start
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()  # never leave a half-started broker behind
            proc.wait()
            raise RuntimeError(f"odradek did not start: {' '.join(cmd)}")
        time.sleep(0.05)
    return proc


@contextmanager
def cluster(src: str | None, processes: bool = False) -> Iterator[tuple[str, list[int]]]:
    """Three brokers: ``odradek up --brokers 3`` (one process, the embedded store), or with ``processes`` three
    ``odradek broker`` processes on a throwaway ZooKeeper. Yields the bootstrap servers and the brokers' pids."""
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        env = dict(os.environ)
        # the broker runs in a temporary directory: a relative path would fall back to whatever is installed
        env["PYTHONPATH"] = str(Path(src).resolve() if src else Path(__file__).resolve().parents[1] / "src")
        common = ["--port", "0", "--log-level", "WARNING"]
        if processes:
            zk = stack.enter_context(LocalZooKeeper(Path(tmp, "zookeeper")))  # __enter__ starts it
            cmds = [(["odradek", "broker", "--id", str(i), "--zookeeper", f"{zk.hosts}/odradek",
                      "--data-dir", f"{tmp}/data-{i}", "--ready-file", f"{tmp}/ready-{i}", *common],
                     Path(tmp, f"ready-{i}")) for i in range(3)]
        else:
            cmds = [(["odradek", "up", "--brokers", "3", "--data-dir", f"{tmp}/data", "--ready-file", f"{tmp}/ready",
                      *registry_off(src), *common], Path(tmp, "ready"))]
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for cmd, ready in cmds:
                procs.append(_start([sys.executable, "-m", *cmd], ready, env, tmp))
            bootstrap = ",".join(ready.read_text().split()[0].split("=", 1)[1] for _cmd, ready in cmds)
            yield bootstrap, [p.pid for p in procs]
        finally:
            for proc in procs:
                # separate brokers stopping at once would each wait for a controlled shutdown nobody can grant
                if processes:
                    proc.kill()
                else:
                    proc.terminate()
            for proc in procs:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()


def cpu_seconds(*pids: int) -> float:
    """User plus system CPU time of processes (all their threads) so far (Linux /proc)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")


def send_paced(producer: Producer, topic: str, total: int, rate: int, acked: Callable[[int, float], object]) -> None:
    """Send ``total`` records of RECORD bytes at ``rate`` per second, each carrying its send time; ``acked(i, ms)``
    for each record acknowledged without error; returns once every record is acknowledged (or after 30 s)."""
    pad = b"x" * (RECORD - 8)
    start = time.perf_counter()
    for i in range(total):
        due = start + i / rate
        while (now := time.perf_counter()) < due:
            producer.poll(max(0.0, min(due - now, 0.001)))
        sent = time.perf_counter()
        producer.produce(topic, struct.pack("d", sent) + pad,
                         on_delivery=lambda err, _m, s=sent, i=i: err is None and acked(
                             i, (time.perf_counter() - s) * 1000))
        producer.poll(0)
    producer.flush(30)


def run_case(bootstrap: str, topic: str, rf: int, acks: str, rate: int, seconds: float,
             producer_config: dict[str, str] | None = None) -> dict[str, float]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, rf)])[topic].result(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "fetch.wait.max.ms": 100, "enable.auto.commit": False})
    consumer.subscribe([topic])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, **(producer_config or {})})
    # warm up: metadata, the group join and the first fetch, so the measured records see the steady state
    producer.produce(topic, b"warm")
    producer.flush(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            break
    acks_ms: list[float] = []
    e2e_ms: list[float] = []
    total = int(rate * seconds)
    done = threading.Event()

    def reader() -> None:
        while len(e2e_ms) < total and not done.is_set():
            m = consumer.poll(0.2)
            if m is None or m.error():
                continue
            value = m.value()
            if value and len(value) == RECORD:
                e2e_ms.append((time.perf_counter() - struct.unpack_from("d", value)[0]) * 1000)

    t = threading.Thread(target=reader)
    t.start()
    send_paced(producer, topic, total, rate, lambda _i, ms: acks_ms.append(ms))
    t.join(30)
    done.set()
    consumer.close()
    return {"ack_p50": pct(acks_ms, .5), "ack_p90": pct(acks_ms, .9), "ack_p99": pct(acks_ms, .99),
            "ack_max": max(acks_ms, default=float("nan")), "e2e_p50": pct(e2e_ms, .5), "e2e_p99": pct(e2e_ms, .99),
            "e2e_max": max(e2e_ms, default=float("nan")), "acked": len(acks_ms), "received": len(e2e_ms)}


def first_records(bootstrap: str, name: str, rf: int, acks: str, rate: int, topics: int, records: int,
                  producer_config: dict[str, str] | None = None) -> dict[str, float]:
    """The first ``records`` records written to each of ``topics`` new topics, produced at ``rate`` as soon as the
    topic is created, no warm-up: what a test suite creating a topic per test sees. One producer for all topics
    (its first record to a topic includes the metadata lookup, as a user's does); per topic a consumer assigned to
    offset 0 of the partition before the first record is sent (no group join in the way; with OFFSET_BEGINNING
    librdkafka's first ListOffsets waits for its 500 ms offset-query timer, a client-side delay)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, **(producer_config or {})})
    firsts: list[float] = []
    acks_ms: list[float] = []
    e2e_first: list[float] = []
    e2e_ms: list[float] = []
    for n in range(topics):
        topic = f"first-{name}-{n}-{os.getpid()}"
        admin.create_topics([NewTopic(topic, 1, rf)])[topic].result(30)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "fetch.wait.max.ms": 100,
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        acked: dict[int, float] = {}
        send_paced(producer, topic, records, rate, lambda i, ms, a=acked: a.setdefault(i, ms))
        received: list[float] = []
        deadline = time.monotonic() + 30
        while len(received) < records and time.monotonic() < deadline:
            m = consumer.poll(0.05)
            if m is not None and not m.error():
                received.append((time.perf_counter() - struct.unpack_from("d", m.value())[0]) * 1000)
        consumer.close()
        if 0 in acked:
            firsts.append(acked[0])
        acks_ms += acked.values()
        if received:
            e2e_first.append(received[0])
        e2e_ms += received
    return {"first_ack_p50": pct(firsts, .5), "first_ack_max": max(firsts, default=float("nan")),
            "ack_p50": pct(acks_ms, .5), "ack_max": max(acks_ms, default=float("nan")),
            "first_e2e_p50": pct(e2e_first, .5), "first_e2e_max": max(e2e_first, default=float("nan")),
            "e2e_max": max(e2e_ms, default=float("nan")), "acked": len(acks_ms), "received": len(e2e_ms)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--src", action="append", help="run the broker from this src dir (repeatable)")
    ap.add_argument("--processes", action="store_true",
                    help="each broker its own process (odradek broker on a throwaway ZooKeeper), not odradek up")
    ap.add_argument("-X", dest="producer_config", action="append", default=[], metavar="KEY=VALUE",
                    help="extra producer config, e.g. -X enable.idempotence=true (repeatable)")
    ap.add_argument("--new-topics", type=int, default=5,
                    help="new topics whose first records are measured apart from the steady state (0: none)")
    ap.add_argument("--first", type=int, default=10, help="records measured per new topic")
    args = ap.parse_args()
    for src in args.src or [None]:
        how = "3 broker processes on ZooKeeper" if args.processes else "odradek up --brokers 3 (one process)"
        print(f"# broker from {src or 'this checkout'}, {how}, event loop {os.environ.get(ENV) or 'default'}: "
              f"{args.rate} msg/s of {RECORD} B for {args.seconds} s")
        with cluster(src, args.processes) as (bootstrap, pids):
            for name, rf, acks in (("rf3-acks-all", 3, "all"), ("rf1-acks-1", 1, "1")):
                cpu0 = cpu_seconds(*pids)
                r = run_case(bootstrap, f"lat-{name}", rf, acks, args.rate, args.seconds,
                             dict(kv.split("=", 1) for kv in args.producer_config))
                cpu_ms = (cpu_seconds(*pids) - cpu0) * 1000 / max(r["acked"], 1)
                print(f"{name:14} ack p50 {r['ack_p50']:.2f} p90 {r['ack_p90']:.2f} p99 {r['ack_p99']:.2f} "
                      f"max {r['ack_max']:.2f} ms | e2e p50 {r['e2e_p50']:.2f} p99 {r['e2e_p99']:.2f} "
                      f"max {r['e2e_max']:.2f} ms | {r['acked']:.0f} acked {r['received']:.0f} received | "
                      f"broker CPU {cpu_ms:.2f} ms/record | load {os.getloadavg()[0]:.1f}",
                      flush=True)
                if args.new_topics:
                    f = first_records(bootstrap, name, rf, acks, args.rate, args.new_topics, args.first,
                                      dict(kv.split("=", 1) for kv in args.producer_config))
                    print(f"{'  new topics':14} first record ack p50 {f['first_ack_p50']:.2f} max "
                          f"{f['first_ack_max']:.2f} ms, first {args.first} p50 {f['ack_p50']:.2f} max "
                          f"{f['ack_max']:.2f} ms | first e2e p50 {f['first_e2e_p50']:.2f} max "
                          f"{f['first_e2e_max']:.2f} ms, first {args.first} max {f['e2e_max']:.2f} ms | "
                          f"{args.new_topics} topics, {f['acked']:.0f} acked {f['received']:.0f} received | "
                          f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
