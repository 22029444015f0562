"""Controller timings on the embedded store (or a real ZooKeeper): failover, leader failover, controlled shutdown.

Anchors from Kafka 1.1's controller rewrite (KAFKA-5642 and the async ZooKeeper client): a controlled shutdown
moving 10,000 leaders took 3 s (6.5 minutes in 1.0), and a controller failover with 100,000 partitions 14 s (28 s
in 1.0). Brokers are played by a transport that answers every request with success at once, so the numbers are
the controller's own work: reading and fencing writes in the store, deciding, and encoding requests. Each phase
reports wall time and the process's CPU time (the machine may be shared; CPU time is the steadier number).

    .venv/bin/python bench/controller.py                                   # embedded store
    .venv/bin/python bench/controller.py --zookeeper 127.0.0.1:2181        # a running ZooKeeper
    .venv/bin/python bench/controller.py --partitions 100000 --brokers 10
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import uuid
from typing import Any

from odradek.clock import SystemClock
from odradek.controller import Controller
from odradek.coordination import Backend, Create, EmbeddedBackend, Session, ZooKeeperBackend
from odradek.coordination.znodes import (
    BrokerRegistration,
    Endpoint,
    PartitionState,
    TopicAssignment,
    ensure_kafka_layout,
    partition_path,
    partition_state_path,
    partitions_path,
    topic_path,
)
from odradek.protocol.controller_requests import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    LeaderAndIsrResponse,
    StopReplicaResponse,
    UpdateMetadataResponse,
    encode_body,
)

OK = {
    LEADER_AND_ISR: encode_body(LeaderAndIsrResponse(0)),
    STOP_REPLICA: encode_body(StopReplicaResponse(0)),
    UPDATE_METADATA: encode_body(UpdateMetadataResponse(0)),
}
CONFIG = {"auto.leader.rebalance.enable": False}


class NullBrokers:
    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0

    async def send(self, broker_id: int, endpoint: Endpoint, api_key: int, body: bytes) -> bytes:
        self.requests += 1
        self.bytes += len(body)
        return OK[api_key]


async def populate(admin: Session, brokers: int, partitions: int, per_topic: int, rf: int) -> None:
    """Topics with round-robin assignments and existing states, as a running cluster has them."""
    creates: list[Create] = []
    for t in range(partitions // per_topic):
        topic = f"topic-{t}"
        assignment = {p: tuple((p + t + i) % brokers for i in range(rf)) for p in range(per_topic)}
        creates.append(Create(topic_path(topic), TopicAssignment(assignment).to_json()))
        creates.append(Create(partitions_path(topic)))
        for p, replicas in assignment.items():
            creates.append(Create(partition_path(topic, p)))
            creates.append(Create(partition_state_path(topic, p),
                                  PartitionState(replicas[0], 0, replicas, 0).to_json()))
    for start in range(0, len(creates), 20_000):
        for result in await admin.create_many(creates[start:start + 20_000]):
            if isinstance(result, Exception):
                raise result


async def register(backend: Backend, broker_id: int) -> Session:
    session = await backend.session(timeout_ms=30_000)
    registration = BrokerRegistration(broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id),))
    await session.create(f"/brokers/ids/{broker_id}", registration.to_json(), ephemeral=True)
    return session


async def wait_active(controllers: list[Controller], not_on: int | None = None) -> Controller:
    while True:
        for c in controllers:
            if c.is_active and c.broker_id != not_on:
                return c
        await asyncio.sleep(0.001)


async def run(backend: Backend, brokers: int, partitions: int) -> dict[str, Any]:
    results: dict[str, Any] = {}
    admin = await backend.session(timeout_ms=30_000)
    await ensure_kafka_layout(admin)
    t0 = time.perf_counter()
    await populate(admin, brokers, partitions, 1000, 3)
    results["populate_s"] = time.perf_counter() - t0

    transport = NullBrokers()
    sessions = {b: await register(backend, b) for b in range(brokers)}
    controllers = [Controller(b, sessions[b], SystemClock(), transport, CONFIG) for b in range(brokers)]
    # 1. Failover: the first controller's election loads everything; then kill it and time the successor.
    await controllers[0].start()
    first = await wait_active(controllers)
    await first.wait_idle()
    for c in controllers[1:]:
        await c.start()
    await asyncio.sleep(0.2)
    transport.requests = transport.bytes = 0
    t0, c0 = time.perf_counter(), time.process_time()
    await backend.expire_session(sessions[first.broker_id])
    await first.stop()
    second = await wait_active(controllers, not_on=first.broker_id)
    await second.wait_idle()
    results["controller_failover_s"] = time.perf_counter() - t0
    results["controller_failover_cpu_s"] = time.process_time() - c0
    results["failover_requests"] = transport.requests
    results["failover_request_mb"] = transport.bytes / 1e6

    # 2. Controlled shutdown of a broker leading `leaders` partitions: make one broker lead that many first.
    victim = next(b for b in range(brokers) if b not in (first.broker_id, second.broker_id))
    led = [tp for tp, s in second.ctx.leadership.items() if s.leader == victim]
    results["shutdown_leaders"] = len(led)
    t0, c0 = time.perf_counter(), time.process_time()
    remaining = await second.controlled_shutdown(victim, -1)
    results["controlled_shutdown_call_s"] = time.perf_counter() - t0
    await second.wait_idle()
    results["controlled_shutdown_s"] = time.perf_counter() - t0
    results["controlled_shutdown_cpu_s"] = time.process_time() - c0
    results["shutdown_remaining"] = len(remaining)

    # 3. Leader failover: kill a broker leading partitions and time until every one has a new leader.
    target = next(b for b in range(brokers) if b not in (first.broker_id, second.broker_id, victim))
    led = [tp for tp, s in second.ctx.leadership.items() if s.leader == target]
    results["failed_broker_leaders"] = len(led)
    t0, c0 = time.perf_counter(), time.process_time()
    await backend.expire_session(sessions[target])
    await controllers[target].stop()
    while any(second.ctx.leadership[tp].leader == target for tp in led):
        await asyncio.sleep(0.001)
    await second.wait_idle()
    results["leader_failover_s"] = time.perf_counter() - t0
    results["leader_failover_cpu_s"] = time.process_time() - c0

    for c in controllers:
        await c.stop()
    await backend.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=10,
                        help="each broker leads partitions/brokers partitions (10,000 with the defaults)")
    parser.add_argument("--zookeeper", help="host:port of a running ZooKeeper (default: the embedded store)")
    args = parser.parse_args()
    gc.freeze()
    backend: Backend = (ZooKeeperBackend(args.zookeeper, f"/bench-controller-{uuid.uuid4().hex[:8]}")
                        if args.zookeeper else EmbeddedBackend(SystemClock()))
    results = asyncio.run(run(backend, args.brokers, args.partitions))
    store = f"zookeeper {args.zookeeper}" if args.zookeeper else "embedded"
    print(f"store={store} brokers={args.brokers} partitions={args.partitions}")
    for key, value in results.items():
        print(f"  {key:28s} {value:.3f}" if isinstance(value, float) else f"  {key:28s} {value}")


if __name__ == "__main__":
    main()
