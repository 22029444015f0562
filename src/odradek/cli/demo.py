"""``odradek demo``: the example pipeline end to end, with a broker failure in the middle.

It starts a cluster in this process (three brokers on the embedded store by default), creates the clickstream topic
(RF 3, min.insync.replicas 2 when there are three brokers), starts the Structured Streaming job of
``examples/page_views.py`` (page views per page per minute, to a topic and to Parquet) through odradek's pure-Python
source and sink (``--format odradek``, no jar) or Spark's own Kafka connector (``--format kafka``, whose jars Maven
fetches on first use), produces the clickstream of
``examples/clickstream.py`` at a steady rate, kills the leader of partition 0 halfway and restarts it, then waits
until the Parquet output holds exactly the totals the generator produced, and says whether it did. The examples are
read from the checkout: ``make demo`` runs this from the repository.

A broker killed mid-stream makes clients and Spark log what they retry (librdkafka's connection failures, a
micro-batch failed and run again, Spark's progress bars), which reads as failure although nothing is lost. So unless
``verbose``, everything written to the process's stderr (the JVM's and librdkafka's included) goes to ``demo.log`` in
the work directory, and stdout says what happened: records produced, the broker killed, where its leaderships
moved, the totals checked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from odradek import event_loop, examples
from odradek.cli.clients import closed_when_done
from odradek.cli.output import progress
from odradek.cluster import LocalCluster

log = logging.getLogger(__name__)
CLICKS_PARTITIONS = 3


class _ClusterThread:
    """The cluster on its own event loop, so Spark and the generator can block the main thread."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.loop = event_loop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="odradek-demo-cluster", daemon=True)
        self.thread.start()

    def call(self, coro: Any, timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.call(self.cluster.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def run(brokers: int, events: int, seconds: float, data_dir: Path | None, verbose: bool = False,
        fmt: str = "odradek") -> bool:
    clickstream, page_views = examples.load()
    workdir = Path(data_dir or tempfile.mkdtemp(prefix="odradek-demo-"))
    if workdir.exists() and any(workdir.iterdir()):
        raise SystemExit(f"odradek demo needs an empty data directory; {workdir} holds an earlier run")
    workdir.mkdir(parents=True, exist_ok=True)
    if not verbose:
        print(f"odradek demo: logs of the brokers, clients and Spark go to {workdir / 'demo.log'} "
              "(--verbose shows them here)", flush=True)
    with contextlib.nullcontext() if verbose else _stderr_to(workdir / "demo.log"):
        return _run(clickstream, page_views, brokers, events, seconds, workdir, verbose, fmt)


def _run(clickstream: Any, page_views: Any, brokers: int, events: int, seconds: float, workdir: Path,
         verbose: bool, fmt: str) -> bool:
    cluster = _ClusterThread(LocalCluster(brokers, workdir / "cluster", overrides={
        "group.initial.rebalance.delay.ms": "0", "zookeeper.session.timeout.ms": "3000",
    }))
    try:
        cluster.call(cluster.cluster.start())
        bootstrap = cluster.cluster.bootstrap
        print(f"cluster of {brokers} up: bootstrap.servers={bootstrap}", flush=True)
        from confluent_kafka.admin import AdminClient, NewTopic

        rf = min(3, brokers)
        configs = {"min.insync.replicas": "2"} if rf == 3 else {}
        admin = closed_when_done(AdminClient({"bootstrap.servers": bootstrap}))
        topics = [NewTopic("clicks", CLICKS_PARTITIONS, rf, config=configs), NewTopic("page-views", 1, rf)]
        for fut in admin.create_topics(topics).values():
            fut.result(60)
        print(f"topic clicks: {CLICKS_PARTITIONS} partitions, replication factor {rf}; starting the Spark job "
              f"(format {fmt})", flush=True)
        spark = page_views.session("odradek-demo", progress_bars=verbose, fmt=fmt)
        queries = page_views.start_queries(spark, bootstrap, "clicks", "page-views", workdir / "job", fmt)
        produced: Counter[tuple[str, int]] = Counter()

        def generate() -> None:
            produced.update(clickstream.generate(bootstrap, "clicks", events=events, minutes=5,
                                                 rate_per_s=events / max(seconds / 2, 1)))

        generator = threading.Thread(target=generate, name="clickstream")
        generator.start()
        print(f"producing {events} click events (acks=all, idempotent)", flush=True)
        if brokers > 1:
            time.sleep(seconds / 4)
            led = cluster.call(_leaders(cluster.cluster, "clicks"))
            victim = led.get(0, 0)
            print(f"killing broker {victim} (leader of clicks-0) while the pipeline runs", flush=True)
            cluster.call(cluster.cluster.kill(victim))
            moved = _wait_for_new_leaders(cluster, {p for p, leader in led.items() if leader == victim}, victim)
            print("leaders moved: " + (", ".join(f"clicks-{p} to broker {b}" for p, b in sorted(moved.items()))
                                       or "not yet (the survivors still wait for its session to expire)"), flush=True)
            time.sleep(min(10.0, seconds / 8))
            cluster.call(cluster.cluster.start_broker(victim))
            print(f"broker {victim} restarted", flush=True)
        generator.join()
        print(f"every event produced; waiting for Spark to count them all (up to {seconds:.0f} s)", flush=True)
        deadline = time.monotonic() + seconds
        got: Counter[tuple[str, int]] = Counter()
        total = sum(produced.values())
        with progress(transient=False) as bar:  # on a terminal (--verbose): page views counted in Parquet so far
            task = bar.add_task("page views counted", total=total)
            while time.monotonic() < deadline:
                got = page_views.parquet_totals(spark, workdir / "job")
                bar.update(task, completed=min(total, sum(got.values())))
                if got == produced or any(q.exception() is not None for q in queries):
                    break
                time.sleep(2)
        for q in queries:
            failure = q.exception()
            if failure is not None:
                print(f"query {q.name or q.id} failed: {_first_lines(str(failure))}", flush=True)
            q.stop()
        spark.stop()
        print(f"produced {sum(produced.values())} page views in {len(produced)} (page, minute) windows")
        print(f"counted  {sum(got.values())} page views in {len(got)} windows (Parquet)")
        ok = got == produced
        print("totals match: nothing lost, nothing counted twice" if ok else "MISMATCH between produced and counted")
        return ok
    finally:
        cluster.close()


@contextlib.contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Point file descriptor 2 at ``path``, so the JVM and librdkafka, which write to it directly, go there too."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def _wait_for_new_leaders(cluster: _ClusterThread, partitions: set[int], victim: int,
                          timeout_s: float = 30.0) -> dict[int, int]:
    """Where the killed broker's leaderships went, once every one has moved (or what had moved by the timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        led = cluster.call(_leaders(cluster.cluster, "clicks"))
        moved = {p: led[p] for p in partitions if led.get(p, victim) != victim}
        if len(moved) == len(partitions) or time.monotonic() > deadline:
            return moved
        time.sleep(0.2)


def _first_lines(text: str, lines: int = 12) -> str:
    """Spark's exceptions carry the Python traceback first and pages of JVM frames after it."""
    return "\n".join(text.splitlines()[:lines])


async def _leaders(cluster: LocalCluster, topic: str) -> dict[int, int]:
    """Each partition's leader as the running brokers' metadata says (the first running broker that knows it)."""
    out: dict[int, int] = {}
    for broker in cluster.brokers.values():
        if not broker.running:
            continue
        for partition in range(CLICKS_PARTITIONS):
            leader = broker.metadata.leader_for(topic, partition)
            if leader is not None and partition not in out:
                out[partition] = leader
    return out


@click.command()
@click.option("--brokers", default=3, show_default=True, type=int)
@click.option("--events", default=20000, show_default=True, type=int, help="clickstream events to produce")
@click.option("--seconds", default=60.0, show_default=True, type=float, help="how long producing and checking take")
@click.option("--data-dir", default=None, type=click.Path(path_type=Path))
@click.option("--verbose", is_flag=True, help="show the brokers', clients' and Spark's logs and progress bars here")
@click.option("--format", "fmt", type=click.Choice(["odradek", "kafka"]), default="odradek", show_default=True,
              help="odradek's pure-Python source and sink, or Spark's own Kafka connector (fetched with Maven)")
def demo(brokers: int, events: int, seconds: float, data_dir: Path | None, verbose: bool, fmt: str) -> None:
    """Run the example Spark pipeline against a fresh cluster, kill a broker midway, check the totals."""
    from odradek.runner import configure_logging

    configure_logging("WARNING")
    if not run(brokers, events, seconds, data_dir, verbose, fmt):
        raise SystemExit(1)
