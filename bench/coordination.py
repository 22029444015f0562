"""Coordination store throughput: create, read and compare-and-set N partition-state znodes.

This is the controller's bulk path (a broker failure or a controlled shutdown rewrites the state znode of every
partition it led). Kafka 1.1 took a 10,000-partition controlled shutdown from 6.5 minutes to 3 seconds by moving
these calls to ZooKeeper's async API; here the pipelined ``*_many`` calls play that role, and a short
one-request-at-a-time run on the same backend shows what pipelining buys.

    .venv/bin/python bench/coordination.py                      # both backends, 100,000 partitions
    .venv/bin/python bench/coordination.py --backend embedded --partitions 20000
    .venv/bin/python bench/coordination.py --backend zookeeper --zookeeper 127.0.0.1:2181

Without ``--zookeeper`` a private ZooKeeper 3.8 is started on a random loopback port (full JIT, 1 GiB heap)
and stopped afterwards. Every run works under a fresh chroot and deletes what it made. Timed phases follow an
untimed warm-up (``--warm-up``), reported separately, since a production ZooKeeper is a long-running JVM.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.coordination import (
    Backend,
    CoordinationError,
    Create,
    Delete,
    EmbeddedBackend,
    Session,
    SetData,
    ZooKeeperBackend,
)
from odradek.coordination.localzk import LocalZooKeeper
from odradek.coordination.znodes import PartitionState, partition_path, partition_state_path, partitions_path

TOPIC = "bench"
BROKERS = 5
REPLICATION = 3
SEQUENTIAL_SAMPLE = 2_000
BULK_CAS = "compare-and-set state znodes"


@dataclass
class Phase:
    name: str
    ops: int
    seconds: float
    cpu_seconds: float
    """This process's CPU time: on a shared machine, ops per CPU-second is the figure that load does not skew."""
    server_cpu_seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.ops / self.seconds if self.seconds else float("inf")

    @property
    def cpu_rate(self) -> float:
        return self.ops / self.cpu_seconds if self.cpu_seconds else float("inf")


def initial_state(partition: int) -> PartitionState:
    replicas = tuple((partition + i) % BROKERS for i in range(REPLICATION))
    return PartitionState(leader=replicas[0], leader_epoch=0, isr=replicas, controller_epoch=1)


class Meter:
    """Times a phase: wall clock, this process's CPU, and the ZooKeeper server's CPU when it is ours to read."""

    def __init__(self, server_cpu: Callable[[], float] | None = None) -> None:
        self.server_cpu = server_cpu or (lambda: 0.0)

    async def timed(self, name: str, ops: int, run: Callable[[], Awaitable[Sequence[Any]]]) -> Phase:
        start, cpu_start, server_start = time.perf_counter(), time.process_time(), self.server_cpu()
        results = await run()
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        server_seconds = self.server_cpu() - server_start
        failures = [r for r in results if isinstance(r, CoordinationError)]
        if failures:
            raise SystemExit(f"{name}: {len(failures)} of {ops} failed, first: {failures[0]!r}")
        return Phase(name, ops, seconds, cpu_seconds, server_seconds)


async def bench_session(session: Session, partitions: int, meter: Meter) -> list[Phase]:
    timed = meter.timed
    await session.ensure_path(partitions_path(TOPIC))
    parents = [Create(partition_path(TOPIC, p)) for p in range(partitions)]
    states = [Create(partition_state_path(TOPIC, p), initial_state(p).to_json()) for p in range(partitions)]
    paths = [c.path for c in states]
    phases = [await timed("create partition znodes", partitions, lambda: session.create_many(parents))]
    phases.append(await timed("create state znodes", partitions, lambda: session.create_many(states)))

    reads: list[Any] = []

    async def read_all() -> Sequence[Any]:
        reads.extend(await session.get_many(paths))
        return reads

    phases.append(await timed("read state znodes", partitions, read_all))

    # Compare-and-set each state against the version just read: the controller's leader-epoch bump.
    writes = []
    for path, (data, stat) in zip(paths, reads, strict=True):
        old = PartitionState.from_json(data, path)
        new = PartitionState(old.isr[-1], old.leader_epoch + 1, old.isr, old.controller_epoch)
        writes.append(SetData(path, new.to_json(), expected_version=stat.version))
    phases.append(await timed(BULK_CAS, partitions, lambda: session.set_many(writes)))

    # The same reads and CAS one request at a time, as the pre-1.1 controller did, on a sample.
    sample = paths[:SEQUENTIAL_SAMPLE]

    async def read_one_by_one() -> Sequence[Any]:
        return [await session.get(p) for p in sample]

    async def cas_one_by_one() -> Sequence[Any]:
        out = []
        for p in sample:
            data, stat = await session.get(p)
            out.append(await session.set(p, data, expected_version=stat.version))
        return out

    phases.append(await timed("read, one at a time", len(sample), read_one_by_one))
    phases.append(await timed("get+CAS, one at a time", 2 * len(sample), cas_one_by_one))

    cleanup = [Delete(p) for p in paths] + [Delete(c.path) for c in parents]
    phases.append(await timed("delete all", len(cleanup), lambda: session.delete_many(cleanup)))
    await session.delete_recursive(f"/brokers/topics/{TOPIC}")
    return phases


async def warm_up(session: Session, count: int, meter: Meter) -> Phase:
    """Run each kind of request a while first: a ZooKeeper that has served traffic has its JIT warmed up."""
    await session.ensure_path("/warmup")
    paths = [f"/warmup/{i}" for i in range(count)]

    async def every_kind() -> Sequence[Any]:
        results: list[Any] = await session.create_many([Create(p, b"{}") for p in paths])
        results += await session.get_many(paths)
        results += await session.set_many([SetData(p, b"{}") for p in paths])
        results += await session.delete_many([Delete(p) for p in paths])
        return results

    phase = await meter.timed("warm-up (create/get/set/delete)", 4 * count, every_kind)
    await session.delete("/warmup")
    return phase


async def run_backend(name: str, backend: Backend, partitions: int, warm: int, meter: Meter) -> list[Phase]:
    async with backend:
        session = await backend.session(timeout_ms=30_000)
        phases = [await warm_up(session, warm, meter)] if warm else []
        phases += await bench_session(session, partitions, meter)
    load = os.getloadavg()[0]
    print(f"\n{name}: {partitions:,} partitions (load average {load:.1f} on {os.cpu_count()} CPUs)")
    print(f"  {'phase':32} {'ops':>9} {'wall s':>8} {'ops/s':>10} {'cpu s':>7} {'ops/cpu-s':>10} {'server cpu s':>12}")
    for phase in phases:
        print(
            f"  {phase.name:32} {phase.ops:>9,} {phase.seconds:8.2f} {phase.rate:>10,.0f}"
            f" {phase.cpu_seconds:7.2f} {phase.cpu_rate:>10,.0f} {phase.server_cpu_seconds:12.2f}"
        )
    bulk = [p for p in phases if p.name in ("create state znodes", "read state znodes", BULK_CAS)]
    total = Phase(
        "create+read+CAS of state znodes",
        sum(p.ops for p in bulk),
        sum(p.seconds for p in bulk),
        sum(p.cpu_seconds for p in bulk),
        sum(p.server_cpu_seconds for p in bulk),
    )
    print(
        f"  {total.name:32} {total.ops:>9,} {total.seconds:8.2f} {total.rate:>10,.0f}"
        f" {total.cpu_seconds:7.2f} {total.cpu_rate:>10,.0f} {total.server_cpu_seconds:12.2f}"
    )
    return phases


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["embedded", "zookeeper", "both"], default="both")
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--zookeeper", help="HOST:PORT of an existing ZooKeeper (default: start a private one)")
    parser.add_argument("--warm-up", type=int, default=20_000, help="znodes in the untimed warm-up (0: none)")
    args = parser.parse_args()

    if args.backend in ("embedded", "both"):
        await run_backend("embedded", EmbeddedBackend(), args.partitions, args.warm_up, Meter())
    if args.backend in ("zookeeper", "both"):
        chroot = f"/odradek-bench-{uuid.uuid4().hex[:8]}"
        if args.zookeeper:
            await run_backend(
                f"zookeeper {args.zookeeper}",
                ZooKeeperBackend(args.zookeeper, chroot),
                args.partitions,
                args.warm_up,
                Meter(),
            )
            return
        with (
            tempfile.TemporaryDirectory(prefix="odradek-zk-bench-") as tmp,
            LocalZooKeeper(Path(tmp), heap_mb=1024, quick_start=False) as server,
        ):
            backend = ZooKeeperBackend(server.hosts, chroot)
            meter = Meter(server.cpu_seconds)
            await run_backend("zookeeper 3.8 (local, pipelined)", backend, args.partitions, args.warm_up, meter)


if __name__ == "__main__":
    asyncio.run(main())
