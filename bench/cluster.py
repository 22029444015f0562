"""End-to-end cluster benchmarks on real brokers (issue 5): failover and shutdown times, acks=all throughput.

Unlike ``bench/controller.py`` (simulated brokers, the controller's own work), every phase here runs real odradek
brokers of a :class:`~odradek.cluster.LocalCluster` on the embedded store: the brokers open the logs, apply
LeaderAndIsr, start fetchers and answer the controller, so a phase ends when the *brokers* have done the work.

Phases (each prints one line; ``--only`` picks some):

* ``shutdown``: controlled shutdown of a broker leading ``--partitions`` partitions (RF 3); time until its
  controlled-shutdown call returns, and until every partition is led (broker-side) by another broker.
* ``failover``: the same broker, leading them all again after a preferred election, is killed; its session is
  expired at once (so the number excludes ``zookeeper.session.timeout.ms``, which is pure configuration); time
  until every partition is led by a surviving broker.
* ``controller``: the controller's broker is killed (session expired at once) in a cluster holding
  ``--controller-partitions`` partitions (RF 1 on the other brokers, so only the controller moves); time until
  another broker is controller and has sent, and had answered, every request of its failover.
* ``throughput``: an idempotent acks=all confluent-kafka producer against a 6-partition RF 3 topic with
  min.insync.replicas=2; messages/s, MB/s and per-message delivery latency percentiles.

    .venv/bin/python bench/cluster.py --partitions 10000 --controller-partitions 100000

Partitions are created in bulk by writing ``/brokers/topics/{topic}`` with its replica assignment straight into the
store (what CreateTopics does after validation), so the creation time is the controller's and brokers' work.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import resource
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from odradek.broker.log.handles import process_files
from odradek.cluster import LocalCluster
from odradek.controller import PREFERRED
from odradek.coordination import znodes as zn

T = TypeVar("T")
ZK_TOPIC_PARTITIONS = 10_000  # the ZooKeeper phases spread more partitions over several topics
BROKER_LOG_LEVEL = os.environ.get("ODRADEK_BENCH_BROKER_LOG_LEVEL", "WARNING")
OVERRIDES = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "30000",
             "leader.imbalance.check.interval.seconds": "3000", "group.initial.rebalance.delay.ms": "0",
             "offsets.topic.num.partitions": "3"}


def raise_fd_limit(wanted: int) -> None:
    """Up to the hard limit: sockets and segment files of every broker in this process share it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


class LoopThread:
    """The cluster's event loop on its own thread, so blocking Kafka clients can run on the main one."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 3600) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.01) -> float:
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"{what} did not happen within {timeout}s")
        await asyncio.sleep(interval)
    return time.perf_counter()


def led_by(cluster: LocalCluster, topic: str, count: int, brokers: set[int] | None = None) -> int:
    """Partitions of ``topic`` whose leader is running and acts as leader (broker-side state, not metadata)."""
    led = 0
    for broker_id, b in cluster.brokers.items():
        if not b.running or (brokers is not None and broker_id not in brokers):
            continue
        led += sum(1 for (t, _i), part in b.replicas.partitions.items() if t == topic and part.is_leader)
    return led


async def create_bulk(cluster: LocalCluster, topic: str, assignment: Mapping[int, tuple[int, ...]]) -> float:
    """Write the topic's assignment znode directly; seconds until every partition is led broker-side."""
    broker = next(b for b in cluster.brokers.values() if b.running)
    start = time.perf_counter()
    await broker.membership.current().create(zn.topic_path(topic), zn.TopicAssignment(assignment).to_json())
    end = await wait_until(lambda: led_by(cluster, topic, len(assignment)) == len(assignment), 1800,
                           f"{len(assignment)} partitions led")
    return end - start


def controller_of(cluster: LocalCluster) -> Any:
    cid = cluster.controller_id()
    assert cid is not None
    controller = cluster.brokers[cid].controller
    return cid, controller


async def kill_now(cluster: LocalCluster, broker_id: int) -> None:
    """SIGKILL and an immediate session expiry: the failure is detected at once."""
    broker = cluster.brokers[broker_id]
    session = broker.membership.session
    await cluster.kill(broker_id)
    if session is not None:
        cluster.backend.expire(session.session_id)


class Window:
    """cProfile switched on only inside measured windows, so set-up (bulk creation) does not drown them."""

    def __init__(self, path: str | None) -> None:
        import cProfile

        self.profiler = cProfile.Profile() if path else None
        self.path = path

    def __enter__(self) -> None:
        if self.profiler is not None:
            self.profiler.enable()

    def __exit__(self, *exc: object) -> None:
        if self.profiler is not None:
            self.profiler.disable()

    def dump(self) -> None:
        if self.profiler is not None and self.path:
            self.profiler.dump_stats(self.path)


PROFILE = Window(None)


async def leadership_phases(data_dir: Path, partitions: int, results: dict[str, Any]) -> None:
    cluster = LocalCluster(3, data_dir, overrides=OVERRIDES)
    await cluster.start()
    try:
        topic = "lead"
        # the broker under test must not be the controller, or its shutdown and death also move the controller
        cid, _ctl = controller_of(cluster)
        victim = next(b for b in (2, 1, 0) if b != cid)
        a, b = (x for x in range(3) if x != victim)
        assignment = {p: (victim, a, b) if p % 2 == 0 else (victim, b, a) for p in range(partitions)}
        survivors = {a, b}
        results["create_s"] = await create_bulk(cluster, topic, assignment)
        print(f"created {partitions} partitions (RF 3, all led by broker {victim}) in {results['create_s']:.2f} s",
              flush=True)
        _cid, ctl = controller_of(cluster)
        await ctl.wait_idle()

        # --- controlled shutdown ---------------------------------------------------------------------------
        victim_broker = cluster.brokers[victim]
        original = victim_broker.controlled_shutdown
        marks: dict[str, float] = {}

        async def timed() -> None:
            await original()
            marks["returned"] = time.perf_counter()

        victim_broker.controlled_shutdown = timed  # type: ignore[method-assign]
        with PROFILE:
            start = time.perf_counter()
            stopper = asyncio.create_task(cluster.stop_broker(victim, controlled=True))
            moved = await wait_until(lambda: led_by(cluster, topic, partitions, survivors) == partitions, 600,
                                     "leaders moved off the broker")
            await stopper
        results["shutdown_call_s"] = marks["returned"] - start
        results["shutdown_moved_s"] = moved - start
        print(f"controlled shutdown of a broker leading {partitions}: call returned {results['shutdown_call_s']:.2f} s,"
              f" every partition led elsewhere {results['shutdown_moved_s']:.2f} s", flush=True)

        # --- back, preferred leaders again ------------------------------------------------------------------
        await cluster.start_broker(victim)
        _cid, ctl = controller_of(cluster)
        await wait_until(lambda: sum(1 for tp, s in ctl.ctx.leadership.items() if tp.topic == topic
                                     and len(s.isr) == 3) == partitions, 600, "the broker back in every ISR", 0.2)
        await ctl.elect_leaders(None, PREFERRED)
        await wait_until(lambda: led_by(cluster, topic, partitions, {victim}) == partitions, 600,
                         "the broker leading again", 0.05)
        await controller_of(cluster)[1].wait_idle()

        # --- leader failover --------------------------------------------------------------------------------
        with PROFILE:
            start = time.perf_counter()
            await kill_now(cluster, victim)
            moved = await wait_until(lambda: led_by(cluster, topic, partitions, survivors) == partitions, 600,
                                     "leaders failed over")
        results["failover_s"] = moved - start
        print(f"leader failover after killing a broker leading {partitions}: {results['failover_s']:.2f} s",
              flush=True)
    finally:
        await cluster.stop()


async def controller_phase(data_dir: Path, partitions: int, results: dict[str, Any]) -> None:
    cluster = LocalCluster(4, data_dir, overrides=OVERRIDES)
    await cluster.start()
    try:
        cid, _ctl = controller_of(cluster)
        others = [b for b in range(4) if b != cid]
        per_topic = 10_000
        created = 0.0
        for t in range((partitions + per_topic - 1) // per_topic):
            count = min(per_topic, partitions - t * per_topic)
            layout = {p: (others[(t * per_topic + p) % 3],) for p in range(count)}
            created += await create_bulk(cluster, f"c{t}", layout)
        results["controller_create_s"] = created
        print(f"created {partitions} partitions (RF 1 on the 3 non-controller brokers) in {created:.1f} s", flush=True)
        _cid, ctl = controller_of(cluster)
        await ctl.wait_idle()
        old_epoch = ctl.epoch
        with PROFILE:
            start = time.perf_counter()
            await kill_now(cluster, cid)
            active = await wait_until(lambda: cluster.controller_id() not in (None, cid), 600, "a new controller")
            _new, ctl = controller_of(cluster)
            await ctl.wait_idle()
            done = time.perf_counter()
        assert ctl.epoch > old_epoch
        results["controller_active_s"] = active - start
        results["controller_done_s"] = done - start
        print(f"controller failover with {partitions} partitions: controller active {active - start:.2f} s, "
              f"failover work sent and answered {done - start:.2f} s", flush=True)
    finally:
        await cluster.stop()


def throughput_phase(data_dir: Path, messages: int, size: int, rate: int, results: dict[str, Any]) -> None:
    from confluent_kafka import Producer

    from odradek.admin import create_topic
    from odradek.client import KafkaConnection

    loop = LoopThread()
    cluster = loop.call(_make(data_dir))
    try:
        loop.call(cluster.start())
        bootstrap = loop.call(_bootstrap(cluster))
        with KafkaConnection(bootstrap) as conn:
            create_topic(conn, "tp", 6, 3, {"min.insync.replicas": "2"})
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "batch.num.messages": 10000, "message.timeout.ms": 120000})
        payload = b"x" * size
        latencies: list[float] = []
        sent_at: dict[int, float] = {}

        def done(err: Any, msg: Any) -> None:
            if err is None:
                latencies.append(time.perf_counter() - sent_at.pop(int(msg.key())))

        for _ in range(2000):  # warm-up: connections, metadata, producer id
            producer.produce("tp", key=b"-1", value=payload)
        producer.flush(60)
        start = time.perf_counter()
        for i in range(messages):
            while True:
                try:
                    sent_at[i] = time.perf_counter()
                    producer.produce("tp", key=str(i).encode(), value=payload, on_delivery=done)
                    break
                except BufferError:
                    producer.poll(0.01)
            if i % 1000 == 0:
                producer.poll(0)
        producer.flush(300)
        elapsed = time.perf_counter() - start
        latencies.sort()
        results.update({
            "tput_msgs_s": len(latencies) / elapsed, "tput_mb_s": len(latencies) * size / elapsed / 1e6,
            "p50_ms": 1000 * latencies[len(latencies) // 2], "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
            "mean_ms": 1000 * statistics.fmean(latencies), "acked": len(latencies),
        })
        print(f"acks=all RF 3 idempotent, {size} B messages: {results['tput_msgs_s']:.0f} msg/s "
              f"({results['tput_mb_s']:.1f} MB/s), latency p50 {results['p50_ms']:.1f} ms "
              f"p99 {results['p99_ms']:.1f} ms"
              f" ({results['acked']}/{messages} acknowledged)", flush=True)
        # the same producer paced well below saturation: latency without queueing behind the backlog
        latencies.clear()
        paced = rate * 10
        start = time.perf_counter()
        for i in range(paced):
            due = start + i / rate
            while (now := time.perf_counter()) < due:
                producer.poll(min(due - now, 0.001))
            sent_at[messages + i] = time.perf_counter()
            producer.produce("tp", key=str(messages + i).encode(), value=payload, on_delivery=done)
        producer.flush(120)
        latencies.sort()
        results.update({"paced_rate": rate, "paced_p50_ms": 1000 * latencies[len(latencies) // 2],
                        "paced_p99_ms": 1000 * latencies[int(len(latencies) * 0.99)]})
        print(f"paced at {rate} msg/s for 10 s: latency p50 {results['paced_p50_ms']:.1f} ms "
              f"p99 {results['paced_p99_ms']:.1f} ms", flush=True)
    finally:
        loop.call(cluster.stop())
        loop.close()


async def _make(data_dir: Path) -> LocalCluster:
    return LocalCluster(3, data_dir, overrides=OVERRIDES)


async def _bootstrap(cluster: LocalCluster) -> str:
    return cluster.bootstrap


class ZkBrokers:
    """``odradek broker`` processes on a private ZooKeeper 3.8 (server JIT on, not quick-start)."""

    def __init__(self, base: Path, session_timeout_ms: int) -> None:
        from odradek.coordination.localzk import LocalZooKeeper

        self.base = base
        self.session_timeout_ms = session_timeout_ms
        self.server = LocalZooKeeper(base / "zk", quick_start=False).start()
        self.procs: dict[int, Any] = {}
        self.ports: dict[int, int] = {}

    def address(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.ports[broker_id]}"

    def start(self, broker_id: int) -> None:
        import subprocess
        import sys

        ready = self.base / f"b{broker_id}.ready"
        ready.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(broker_id), "--zookeeper",
               f"{self.server.hosts}/bench", "--port", str(self.ports.get(broker_id, 0)), "--data-dir",
               str(self.base / f"broker-{broker_id}"), "--ready-file", str(ready), "--log-level", BROKER_LOG_LEVEL]
        for k, v in {**OVERRIDES, "zookeeper.session.timeout.ms": str(self.session_timeout_ms)}.items():
            cmd += ["--override", f"{k}={v}"]
        with open(self.base / f"b{broker_id}.log", "ab") as log:
            self.procs[broker_id] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 900
        while not ready.exists():
            if time.monotonic() > deadline or self.procs[broker_id].poll() is not None:
                tail = (self.base / f"b{broker_id}.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"broker {broker_id} did not start:\n{tail}")
            time.sleep(0.05)
        self.ports[broker_id] = int(ready.read_text().strip().rsplit(":", 1)[1])

    def controller_id(self, address: str) -> int:
        from odradek.admin import metadata
        from odradek.client import KafkaConnection

        with KafkaConnection(address) as conn:
            return int(metadata(conn, []).controller_id)

    def create(self, address: str, topic: str, layout: dict[int, tuple[int, ...]], wait_s: float = 600) -> None:
        """CreateTopics with an explicit replica assignment (as ``--replica-assignment`` does)."""
        import datetime

        from odradek.admin import CREATE_TOPICS, request_schema
        from odradek.client import KafkaConnection

        with KafkaConnection(address, timeout=wait_s + 30) as conn:
            version, cls, mod = request_schema(conn, CREATE_TOPICS, 7)
            assignments = tuple(mod.CreatableReplicaAssignment(partition_index=p, broker_ids=replicas)
                                for p, replicas in layout.items())
            creatable = mod.CreatableTopic(name=topic, num_partitions=-1, replication_factor=-1,
                                           assignments=assignments, configs=())
            conn.request(CREATE_TOPICS, cls(topics=(creatable,), timeout=datetime.timedelta(seconds=wait_s),
                                            validate_only=False), version)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(60)
        self.server.stop()


def poll_metadata(address: str, topics: list[str], done: Callable[[dict[tuple[str, int], tuple[int, int]]], bool],
                  timeout: float, interval: float = 0.02) -> float:
    """Poll Metadata on ``address`` until ``done((topic, partition) -> (leader, ISR size))``; when it held."""
    from odradek.admin import metadata
    from odradek.client import KafkaConnection

    deadline = time.monotonic() + timeout
    while True:
        try:
            with KafkaConnection(address, timeout=120) as conn:
                response = metadata(conn, topics)
            seen = {(t.name, p.partition_index): (p.leader_id, len(p.isr_nodes))
                    for t in response.topics for p in t.partitions}
            if done(seen):
                return time.perf_counter()
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition on {topics[:3]} not reached")
        time.sleep(interval)


def zookeeper_phases(base: Path, partitions: int, results: dict[str, Any]) -> None:
    """Controlled shutdown and leader failover with ``odradek broker`` processes on a real ZooKeeper, measured
    from outside as clients see it (Metadata polled from a surviving broker)."""
    import signal

    from odradek.cli.cluster import controller_connection, elect_leaders

    # Kafka 1.x's default session timeout (2 s let a 10,000-partition creation on two shared cores expire every
    # broker's session once; the failover number below includes this detection time).
    zk = ZkBrokers(base / "zk-lead", session_timeout_ms=6000)
    try:
        for b in range(3):
            zk.start(b)
        cid = zk.controller_id(zk.address(0))
        victim = next(b for b in (2, 1, 0) if b != cid)
        a, b2 = (x for x in range(3) if x != victim)
        survivor = zk.address(a)
        # topics of at most ZK_TOPIC_PARTITIONS: a topic's assignment is one znode, and ZooKeeper refuses a znode
        # over jute.maxbuffer (1 MiB by default; 100,000 partitions' assignment JSON is about 1.4 MB)
        topics = [f"lead-{i}" for i in range(-(-partitions // ZK_TOPIC_PARTITIONS))]
        for i, topic in enumerate(topics):
            count = min(ZK_TOPIC_PARTITIONS, partitions - i * ZK_TOPIC_PARTITIONS)
            zk.create(zk.address(0), topic,
                      {p: (victim, a, b2) if p % 2 == 0 else (victim, b2, a) for p in range(count)})
        created = time.perf_counter()
        poll_metadata(survivor, topics, lambda m: len(m) == partitions
                      and all(v == (victim, 3) for v in m.values()), 1800, 0.5)
        print(f"[zookeeper] created {partitions} partitions (RF 3, all led by broker {victim}) in "
              f"{time.perf_counter() - created:.1f} s", flush=True)

        start_t = time.perf_counter()
        zk.procs[victim].send_signal(signal.SIGTERM)
        moved = poll_metadata(survivor, topics, lambda m: all(v[0] in (a, b2) for v in m.values()), 600)
        zk.procs[victim].wait(600)
        exited = time.perf_counter()
        results["zk_shutdown_moved_s"] = moved - start_t
        results["zk_shutdown_exit_s"] = exited - start_t
        print(f"[zookeeper] controlled shutdown of a broker leading {partitions}: every partition led elsewhere "
              f"(Metadata) {moved - start_t:.2f} s, process exited {exited - start_t:.2f} s", flush=True)

        restart_t = time.perf_counter()
        zk.start(victim)
        print(f"[zookeeper] broker restarted with {partitions} logs in {time.perf_counter() - restart_t:.1f} s",
              flush=True)
        poll_metadata(survivor, topics, lambda m: all(v[1] == 3 for v in m.values()), 900, 0.5)
        with controller_connection(survivor) as conn:
            elect_leaders(conn, PREFERRED, None)
        poll_metadata(survivor, topics, lambda m: all(v[0] == victim for v in m.values()), 600)

        start_t = time.perf_counter()
        zk.procs[victim].kill()
        moved = poll_metadata(survivor, topics, lambda m: all(v[0] in (a, b2) for v in m.values()), 600)
        results["zk_failover_s"] = moved - start_t
        print(f"[zookeeper] leader failover after SIGKILL of a broker leading {partitions}: {moved - start_t:.2f} s "
              f"(includes failure detection: up to the {zk.session_timeout_ms / 1000:.0f} s session timeout)",
              flush=True)
    finally:
        zk.close()


def zookeeper_controller_phase(base: Path, partitions: int, results: dict[str, Any]) -> None:
    """Controller failover with four broker processes on ZooKeeper: ``partitions`` (RF 1, on the three brokers that
    are not controller) in topics of 10,000; the controller's process is killed with SIGKILL.

    Measured from outside: until Metadata on a survivor names another controller, and until a topic created right
    after the kill is led. The new controller handles that creation only after its whole failover (one event
    queue), and its LeaderAndIsr reaches the broker behind every failover request in that broker's channel, so the
    second number is the failover as a client can observe it finished.
    """
    # Kafka 1.x's default session timeout: the anchor's clusters ran with it, and 100,000-partition brokers on two
    # shared cores need more than the 2 s the leadership phases use.
    zk = ZkBrokers(base / "zk-controller", session_timeout_ms=6000)
    try:
        for b in range(4):
            zk.start(b)
        cid = zk.controller_id(zk.address(0))
        others = [b for b in range(4) if b != cid]
        survivor = zk.address(others[0])
        per_topic = 10_000
        topics = []
        t0 = time.perf_counter()
        for t in range((partitions + per_topic - 1) // per_topic):
            count = min(per_topic, partitions - t * per_topic)
            topics.append(f"c{t}")
            zk.create(survivor, topics[-1], {p: (others[(t * per_topic + p) % 3],) for p in range(count)})
        poll_metadata(survivor, topics, lambda m: len(m) == partitions and all(v[0] >= 0 for v in m.values()),
                      1800, 1.0)
        print(f"[zookeeper] created {partitions} partitions (RF 1 on the 3 non-controller brokers) in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)

        start_t = time.perf_counter()
        zk.procs[cid].kill()
        while True:
            try:
                new = zk.controller_id(survivor)
            except OSError:
                new = -1
            if new not in (-1, cid):
                break
            time.sleep(0.02)
        active = time.perf_counter()
        probe_owner = others[1]
        try:
            zk.create(survivor, "probe", {0: (probe_owner,)}, wait_s=1)
        except Exception as exc:  # the creation is answered with a timeout while the controller is busy: fine
            logging.debug("probe creation answered %s", exc)
        done = poll_metadata(survivor, ["probe"], lambda m: m.get(("probe", 0), (-1, 0))[0] == probe_owner, 600)
        results["zk_controller_active_s"] = active - start_t
        results["zk_controller_done_s"] = done - start_t
        results["zk_controller_work_s"] = done - active
        print(f"[zookeeper] controller failover with {partitions} partitions after SIGKILL (includes up to "
              f"the {zk.session_timeout_ms / 1000:.0f} s session timeout): "
              f"another controller {active - start_t:.2f} s, "
              f"a topic created after the kill led {done - start_t:.2f} s ({done - active:.2f} s after the new "
              "controller appeared)", flush=True)
    finally:
        zk.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=2_000)
    parser.add_argument("--controller-partitions", type=int, default=5_000)
    parser.add_argument("--rate", type=int, default=5_000, help="paced latency run: messages per second")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--only", default="shutdown,failover,controller,throughput",
                        help="phases; add 'zookeeper' (shutdown and failover) and 'zookeeper-controller' for the "
                             "same shapes with broker processes on ZooKeeper")
    parser.add_argument("--profile", default=None, help="write a cProfile of the measured windows here")
    parser.add_argument("--json", default=None, help="write the numbers here")
    parser.add_argument("--work-dir", default=None, help="keep data and broker logs here instead of a temporary dir")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    only = set(args.only.split(","))
    raise_fd_limit(1 << 20)
    print(f"segment files kept open at most: {process_files().capacity} (all brokers of this process share them)",
          flush=True)
    results: dict[str, Any] = {}
    global PROFILE
    PROFILE = Window(args.profile)
    keep = Path(args.work_dir) if args.work_dir else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext(str(keep)) if keep else tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        if only & {"shutdown", "failover"}:
            asyncio.run(leadership_phases(Path(tmp) / "lead", args.partitions, results))
        if "controller" in only:
            asyncio.run(controller_phase(Path(tmp) / "controller", args.controller_partitions, results))
        if "zookeeper" in only:
            zookeeper_phases(Path(tmp), args.partitions, results)
        if "zookeeper-controller" in only:
            zookeeper_controller_phase(Path(tmp), args.controller_partitions, results)
        if "throughput" in only:
            throughput_phase(Path(tmp) / "tput", args.messages, args.size, args.rate, results)
    PROFILE.dump()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
