"""Cost curves (issue 11): how the broker's cost grows with the work, one measurement at a time.

Each ``--what`` runs alone, with its sizes as arguments, and adds its numbers (with the machine's load average
before and after, since the machine is shared) to ``bench/scaling.json``; every run then rewrites the
"## Cost curves (issue 11)" section of bench/RESULTS.md and the plots under bench/plots/ from everything measured so
far, so sizes can be measured in separate invocations as time allows.

* ``produce``: one broker (``odradek up``), N partitions (RF 1, topics of at most 500), a fixed total of 1 KiB
  records spread round-robin over every partition by a confluent-kafka producer (acks=1, linger.ms=5), then one
  consumer assigned every partition reads them all back: MB/s each way.
* ``memory``: one broker; its RSS before and after N partitions (RF 1, topics of at most 500) are created and
  one record written to each (so every log is open and holds a segment): bytes per partition.
* ``shutdown``: bench/cluster.py's leadership phases (three brokers in one process on the embedded store, a broker
  leading N partitions at RF 3): its controlled shutdown, then, leading them again, its death (leader failover).
* ``failover``: bench/cluster.py's controller phase: the controller's broker killed in a cluster holding N
  partitions (RF 1 on the three other brokers); until another broker is controller and its failover is answered.
* ``latency``: bench/latency.py's acks=all case (``odradek up --brokers 3``, one RF 3 partition, 1 KiB records,
  linger.ms=0) at each rate: ack and end-to-end percentiles.

    PYTHONPATH=src .venv/bin/python bench/scaling.py --what produce --partitions 1,10,100,1000,10000 --total-mb 64
    PYTHONPATH=src .venv/bin/python bench/scaling.py --what memory --partitions 1000,10000
    PYTHONPATH=src .venv/bin/python bench/scaling.py --what shutdown --partitions 1000,10000
    PYTHONPATH=src .venv/bin/python bench/scaling.py --what failover --partitions 1000,10000
    PYTHONPATH=src .venv/bin/python bench/scaling.py --what latency --rates 50,100,250,500,1000 --seconds 10
    PYTHONPATH=src .venv/bin/python bench/scaling.py --what report     # RESULTS.md and the plots only
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import cluster as cluster_bench  # noqa: E402  (bench/cluster.py: the leadership and controller phases)
import latency as latency_bench  # noqa: E402  (bench/latency.py: the cluster and the paced acks=all case)

RESULTS_JSON = BENCH / "scaling.json"
RESULTS_MD = BENCH / "RESULTS.md"
PLOTS = BENCH / "plots"
SECTION = "## Cost curves (issue 11)"
VALUE = b"x" * 1024
PER_TOPIC = 500  # partitions per topic: one CreateTopics must be answered within librdkafka's 300 s at most


# --- the machine and the record --------------------------------------------------------------------------------

def load() -> float:
    return round(os.getloadavg()[0], 1)


def machine() -> str:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import confluent_kafka

    return (f"{os.cpu_count()} CPUs ({cpu}), {mem_gb:.0f} GiB RAM, Python {platform.python_version()}, "
            f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})")


def record(what: str, size: int, numbers: dict[str, Any], load_before: float) -> None:
    """Keep one measurement (the latest per ``what`` and size replaces an earlier one)."""
    rows = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else []
    rows = [r for r in rows if not (r["what"] == what and r["size"] == size)]
    rows.append({"what": what, "size": size, "numbers": numbers, "load": [load_before, load()],
                 "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                 "command": "bench/scaling.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
                 "machine": machine()})
    rows.sort(key=lambda r: (r["what"], r["size"]))
    RESULTS_JSON.write_text(json.dumps(rows, indent=1) + "\n")
    print(f"{what} {size}: {numbers} (load {load_before} -> {load()})", flush=True)


# --- one broker as a process -----------------------------------------------------------------------------------

@contextlib.contextmanager
def broker(overrides: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """``odradek up`` (one broker, embedded store) on a free port: its bootstrap address and process id."""
    with tempfile.TemporaryDirectory(prefix="odradek-scaling-") as tmp:
        ready = Path(tmp, "ready")
        env = dict(os.environ, PYTHONPATH=str(BENCH.parent / "src"))
        cmd = [sys.executable, "-m", "odradek", "up", "--port", "0", "--data-dir", f"{tmp}/data",
               "--ready-file", str(ready), "--log-level", "WARNING", "--schema-registry-port", "none"]
        for k, v in (overrides or {}).items():
            cmd += ["--override", f"{k}={v}"]
        with open(Path(tmp, "stderr"), "wb") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tmp)
        try:
            deadline = time.monotonic() + 120
            while not ready.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"odradek did not start: {Path(tmp, 'stderr').read_text()[-2000:]}")
                time.sleep(0.05)
            yield ready.read_text().split()[0].split("=", 1)[1], proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(600)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def create_topics(bootstrap: str, prefix: str, partitions: int) -> list[tuple[str, int]]:
    """Topics of at most PER_TOPIC partitions (RF 1) holding ``partitions`` in all; created one at a time."""
    # the broker answers once every partition is led: minutes for thousands on a loaded machine, past librdkafka's
    # default 60 s socket timeout (300 s is its maximum)
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    topics = []
    for t in range((partitions + PER_TOPIC - 1) // PER_TOPIC):
        name, count = f"{prefix}{t}", min(PER_TOPIC, partitions - t * PER_TOPIC)
        admin.create_topics([NewTopic(name, count, 1)], operation_timeout=600, request_timeout=900)[name].result(900)
        topics.append((name, count))
    return topics


def spread(bootstrap: str, topics: list[tuple[str, int]], records: int) -> float:
    """``records`` 1 KiB records round-robin over every partition of ``topics``; seconds until all acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 1 << 20, "queue.buffering.max.messages": 1_000_000,
                         "message.timeout.ms": 600_000})
    failed = [0]

    def done(err: object, _msg: object) -> None:
        if err is not None:
            failed[0] += 1

    slots = [(name, p) for name, count in topics for p in range(count)]
    start = time.perf_counter()
    for i in range(records):
        name, p = slots[i % len(slots)]
        while True:
            try:
                producer.produce(name, VALUE, partition=p, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(600)
    if left or failed[0]:
        raise RuntimeError(f"{left} records unflushed, {failed[0]} failed")
    return time.perf_counter() - start


def consume(bootstrap: str, topics: list[tuple[str, int]], records: int) -> dict[str, float]:
    """One consumer assigned every partition of ``topics`` reads ``records`` (bench/produce_consume.py's settings)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 8 << 20, "fetch.wait.max.ms": 100,
                  "socket.timeout.ms": 300_000})
    c.assign([TopicPartition(name, p, 0) for name, count in topics for p in range(count)])
    got = nbytes = 0
    start = time.perf_counter()
    deadline = start + 600
    while got < records and time.perf_counter() < deadline:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                got += 1
                nbytes += len(m.value() or b"")
    elapsed = time.perf_counter() - start
    c.close()
    return {"mb_s": nbytes / elapsed / 1e6, "got": got}


# --- the measurements ------------------------------------------------------------------------------------------

def measure_produce(partitions: int, total_mb: int) -> None:
    before = load()
    records = total_mb * 2**20 // len(VALUE)
    with broker() as (bootstrap, _pid):
        t0 = time.perf_counter()
        topics = create_topics(bootstrap, "tp", partitions)
        created = time.perf_counter() - t0
        seconds = spread(bootstrap, topics, records)
        got = consume(bootstrap, topics, records)
    record("produce", partitions, {
        "records": records, "record_bytes": len(VALUE), "create_s": round(created, 2),
        "produce_mb_s": round(records * len(VALUE) / seconds / 1e6, 1),
        "consume_mb_s": round(got["mb_s"], 1), "consumed": got["got"]}, before)


def measure_memory(partitions: int) -> None:
    before = load()
    with broker() as (bootstrap, pid):
        settle = time.monotonic() + 3
        while time.monotonic() < settle:
            time.sleep(0.2)
        base = rss_bytes(pid)
        t0 = time.perf_counter()
        topics = create_topics(bootstrap, "mem", partitions)
        created = time.perf_counter() - t0
        spread(bootstrap, topics, partitions)
        after = rss_bytes(pid)
    record("memory", partitions, {
        "rss_base_mib": round(base / 2**20, 1), "rss_after_mib": round(after / 2**20, 1),
        "per_partition_kib": round((after - base) / partitions / 1024, 1), "create_s": round(created, 1)}, before)


def measure_shutdown(partitions: int) -> None:
    before = load()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="odradek-scaling-") as tmp:
        asyncio.run(cluster_bench.leadership_phases(Path(tmp) / "lead", partitions, results))
    record("shutdown", partitions, {k: round(v, 2) for k, v in results.items()}, before)


def measure_failover(partitions: int) -> None:
    before = load()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="odradek-scaling-") as tmp:
        asyncio.run(cluster_bench.controller_phase(Path(tmp) / "controller", partitions, results))
    record("failover", partitions, {k: round(v, 2) for k, v in results.items()}, before)


def measure_latency(rates: list[int], seconds: float) -> None:
    with latency_bench.cluster(None) as bootstrap:
        for rate in rates:
            before = load()
            r = latency_bench.run_case(bootstrap, f"lat-all-{rate}", 3, "all", rate, seconds)
            record("latency", rate, {k: round(v, 2) for k, v in r.items()} | {"sent": int(rate * seconds)}, before)


# --- the report: RESULTS.md and the plots ----------------------------------------------------------------------

def _rows(rows: list[dict[str, Any]], what: str) -> list[dict[str, Any]]:
    return sorted((r for r in rows if r["what"] == what), key=lambda r: r["size"])


def _load(r: dict[str, Any]) -> str:
    return f"{r['load'][0]} / {r['load'][1]}"


def report() -> None:
    rows = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else []
    plots = plot(rows)
    out = [SECTION, "",
           "`bench/scaling.py` (one measurement per invocation, `--what` and sizes as arguments; the numbers are kept "
           "in `bench/scaling.json` and this section and the plots under `bench/plots/` are rewritten from it). "
           "The machine is shared with other agents: every row carries the 1-minute load average before / after "
           "it, and numbers taken under different loads compare only roughly.", ""]
    machines = sorted({r["machine"] for r in rows})
    out += [f"Machine: {m}." for m in machines] + [""]
    sections: list[tuple[str, str, list[str], Any]] = [
        ("produce", "Produce and consume throughput against partition count (one broker, RF 1, 1 KiB records "
         "round-robin over every partition, acks=1, linger.ms=5; one consumer assigned every partition)",
         ["partitions", "records", "produce MB/s", "consume MB/s", "topic creation (s)"],
         lambda n: [f"{n['records']:,}", n["produce_mb_s"], n["consume_mb_s"], n["create_s"]]),
        ("memory", "Broker memory against partition count (one broker, RF 1, one record in every partition)",
         ["partitions", "RSS before (MiB)", "RSS after (MiB)", "per partition (KiB)", "creation (s)"],
         lambda n: [n["rss_base_mib"], n["rss_after_mib"], n["per_partition_kib"], n["create_s"]]),
        ("shutdown", "Controlled shutdown and leader failover against partitions led (three brokers in one "
         "process, embedded store, RF 3; bench/cluster.py's leadership phases)",
         ["partitions", "shutdown: call returned (s)", "shutdown: all led elsewhere (s)",
          "leader failover after kill (s)", "creation (s)"],
         lambda n: [n["shutdown_call_s"], n["shutdown_moved_s"], n["failover_s"], n["create_s"]]),
        ("failover", "Controller failover against partitions in the cluster (the controller's broker killed, session "
         "expired at once; RF 1 on the three other brokers; bench/cluster.py's controller phase)",
         ["partitions", "another controller (s)", "its failover sent and answered (s)", "creation (s)"],
         lambda n: [n["controller_active_s"], n["controller_done_s"], n["controller_create_s"]]),
        ("latency", "acks=all RF 3 latency against rate (bench/latency.py's case: `odradek up --brokers 3`, one "
         "partition, 1 KiB records, linger.ms=0; ms)",
         ["msg/s", "ack p50", "ack p90", "ack p99", "ack max", "e2e p50", "e2e p99", "sent / acked / received"],
         lambda n: [n["ack_p50"], n["ack_p90"], n["ack_p99"], n["ack_max"], n["e2e_p50"], n["e2e_p99"],
                    f"{n['sent']:,} / {n['acked']:,.0f} / {n['received']:,.0f}"]),
    ]
    for what, title, head, cells in sections:
        mine = _rows(rows, what)
        if not mine:
            continue
        out += [f"### {title}", ""]
        commands = sorted({r["command"] for r in mine})
        out += [f"Command: `PYTHONPATH=src .venv/bin/python {c}`" for c in commands] + [""]
        out += ["| " + " | ".join([*head, "load before / after", "when"]) + " |",
                "|" + "---|" * (len(head) + 2)]
        for r in mine:
            vals = [f"{r['size']:,}"] + [str(v) for v in cells(r["numbers"])] + [_load(r), r["when"]]
            out.append("| " + " | ".join(vals) + " |")
        if what in plots:
            out += ["", f"![{what}](plots/{plots[what]})"]
        out.append("")
    text = RESULTS_MD.read_text()
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + "\n".join(out)
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + "\n".join(out) + (text[end:] if end >= 0 else "")
    RESULTS_MD.write_text(text.rstrip("\n") + "\n")


def plot(rows: list[dict[str, Any]]) -> dict[str, str]:
    """One PNG per measurement with data; returns what -> file name. Needs matplotlib (the ``bench`` extra)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install '.[bench]'): no plots", file=sys.stderr)
        return {}
    PLOTS.mkdir(exist_ok=True)
    series: dict[str, tuple[str, str, list[tuple[str, str]], bool]] = {
        "produce": ("partitions", "MB/s", [("produce_mb_s", "produce"), ("consume_mb_s", "consume")], True),
        "memory": ("partitions", "KiB of RSS per partition", [("per_partition_kib", "per partition")], True),
        "shutdown": ("partitions led by the broker", "seconds",
                     [("shutdown_call_s", "controlled shutdown: call returned"),
                      ("shutdown_moved_s", "controlled shutdown: all led elsewhere"),
                      ("failover_s", "leader failover after kill")], True),
        "failover": ("partitions in the cluster", "seconds",
                     [("controller_active_s", "another controller"),
                      ("controller_done_s", "failover sent and answered")], True),
        "latency": ("msg/s (acks=all, RF 3)", "ms", [("ack_p50", "ack p50"), ("ack_p99", "ack p99"),
                                                     ("e2e_p99", "e2e p99")], True),
    }
    made = {}
    for what, (xlabel, ylabel, keys, logx) in series.items():
        mine = _rows(rows, what)
        if not mine:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        xs = [r["size"] for r in mine]
        for key, label in keys:
            ax.plot(xs, [r["numbers"][key] for r in mine], marker="o", label=label)
        if logx:
            ax.set_xscale("log")
        if what == "latency":
            ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        loads = ", ".join(f"{r['size']:,}: {r['load'][0]}" for r in mine)
        ax.set_title(f"{what} (load avg before: {loads})", fontsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        name = f"scaling-{what}.png"
        fig.savefig(PLOTS / name, dpi=100)
        plt.close(fig)
        made[what] = name
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--what", required=True, choices=["produce", "memory", "failover", "shutdown", "latency",
                                                          "report"])
    parser.add_argument("--partitions", default="1,10,100,1000,10000", help="sizes, comma-separated")
    parser.add_argument("--total-mb", type=int, default=64, help="produce: MiB written at every size")
    parser.add_argument("--rates", default="50,100,250,500,1000", help="latency: msg/s, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="latency: seconds per rate")
    args = parser.parse_args()
    sizes = [int(s) for s in args.partitions.split(",")]
    cluster_bench.raise_fd_limit(1 << 20)
    if args.what == "produce":
        for n in sizes:
            measure_produce(n, args.total_mb)
    elif args.what == "memory":
        for n in sizes:
            measure_memory(n)
    elif args.what == "shutdown":
        for n in sizes:
            measure_shutdown(n)
    elif args.what == "failover":
        for n in sizes:
            measure_failover(n)
    elif args.what == "latency":
        measure_latency([int(r) for r in args.rates.split(",")], args.seconds)
    report()


if __name__ == "__main__":
    main()
