"""Issue 23's scenario on a real ZooKeeper: three brokers reach it through a proxy that drops every connection about
every 0.7 s (each reconnect comes well within the session timeout, so the sessions survive) while 30 topics are
created and one deleted through the admin API. Once the flapping stops, every topic has partition state and a
leader, the controller's context holds what ZooKeeper holds, a retried CreateTopics answers TOPIC_ALREADY_EXISTS
only for topics that are fully there, and ``/admin/delete_topics`` is empty."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic
from coordination_support import CuttableProxy, unique_chroot

from kafka_clients import opened
from odradek.broker.config import BrokerConfig
from odradek.broker.server import Broker
from odradek.coordination import ZooKeeperBackend
from odradek.coordination.localzk import LocalZooKeeper
from odradek.coordination.znodes import DELETE_TOPICS, TOPICS, PartitionState, partition_state_path

pytestmark = pytest.mark.zookeeper

TOPICS_CREATED = 30
DELETED = "flap-0"
DEADLINE_S = 240.0


async def until(predicate: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = await predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def admin_call(admin: AdminClient, call: Callable[[AdminClient], dict[str, Any]], done_codes: set[int],
               timeout: float) -> int:
    """One topic's CreateTopics or DeleteTopics, retried as a client does until it succeeds or is answered with one
    of ``done_codes``; returns the final error code (0 for success)."""
    deadline = time.monotonic() + timeout
    while True:
        future = next(iter(call(admin).values()))
        try:
            future.result(timeout=15)
            return 0
        except Exception as exc:  # a KafkaException carrying the broker's error, or a timeout
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            code = error.code() if error is not None else -1
            if code in done_codes:
                return code
            if time.monotonic() > deadline:
                raise AssertionError(f"admin call kept failing: {exc!r}") from exc


async def flap(proxy: CuttableProxy, stop: asyncio.Event) -> int:
    """Drop every connection through the proxy about every 0.7 s until ``stop``; returns how many drops."""
    drops = 0
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 0.7)
        except TimeoutError:
            proxy.cut()
            drops += 1
            await asyncio.sleep(0.05)  # the cut lasts a moment: reconnect attempts in it are refused
            proxy.restore()
    return drops


@pytest.mark.timeout(DEADLINE_S, func_only=True)
async def test_topics_created_and_deleted_while_zookeeper_connections_flap_all_converge(
    zookeeper: LocalZooKeeper, proxy: CuttableProxy, tmp_path: Path,
) -> None:
    chroot = unique_chroot()
    overrides = {"zookeeper.session.timeout.ms": "10000", "offsets.topic.replication.factor": "3",
                 "auto.leader.rebalance.enable": "false"}
    brokers = [
        Broker(BrokerConfig.build(host="127.0.0.1", port=0, data_dir=str(tmp_path / f"broker-{i}"),
                                  overrides={**overrides, "broker.id": str(i)}),
               ZooKeeperBackend(proxy.hosts, chroot))
        for i in range(3)
    ]
    direct = ZooKeeperBackend(zookeeper.hosts, chroot)
    admin: AdminClient | None = None
    try:
        for broker in brokers:
            await broker.start()
        await until(lambda: _true(sum(b.controller.is_active for b in brokers) == 1), 60, "one active controller")
        bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in brokers)
        admin = opened(AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10_000}))
        names = [f"flap-{i}" for i in range(TOPICS_CREATED)]

        stop = asyncio.Event()
        flapper = asyncio.create_task(flap(proxy, stop))
        for name in names:
            await asyncio.to_thread(admin_call, admin, lambda a, n=name: a.create_topics(  # type: ignore[misc]
                [NewTopic(n, num_partitions=2, replication_factor=3)], operation_timeout=10),
                {KafkaError.TOPIC_ALREADY_EXISTS}, 120)
        await asyncio.to_thread(admin_call, admin, lambda a: a.delete_topics([DELETED], operation_timeout=10),
                                {KafkaError.UNKNOWN_TOPIC_OR_PART}, 120)
        stop.set()
        drops = await flapper
        assert drops > 0, "the connections were never dropped"

        session = await direct.session()
        kept = sorted(set(names) - {DELETED})

        async def every_topic_online() -> bool:
            topics = set(await session.children(TOPICS))
            if topics & set(names) != set(kept) or await session.children(DELETE_TOPICS):
                return False
            for name in kept:
                for p in range(2):
                    path = partition_state_path(name, p)
                    if await session.exists(path) is None:
                        return False
                    state = PartitionState.from_json((await session.get(path))[0], path)
                    if state.leader < 0 or state.leader not in state.isr:
                        return False
            active = [b.controller for b in brokers if b.controller.is_active]
            return len(active) == 1 and active[0].ctx.all_topics == topics and all(
                active[0].ctx.leadership.get(tp) is not None for tp in active[0].ctx.assignments)

        await until(every_topic_online, 60, "every topic with a leader and no deletion pending")
        # A client retrying its CreateTopics now hears that each topic exists, and each one that does is whole.
        for name in kept:
            code = await asyncio.to_thread(admin_call, admin, lambda a, n=name: a.create_topics(  # type: ignore[misc]
                [NewTopic(n, num_partitions=2, replication_factor=3)], operation_timeout=10),
                {KafkaError.TOPIC_ALREADY_EXISTS}, 60)
            assert code == KafkaError.TOPIC_ALREADY_EXISTS, f"{name}: {code}"
        metadata = await asyncio.to_thread(admin.list_topics, timeout=15)
        for name in kept:
            partitions = metadata.topics[name].partitions
            assert sorted(partitions) == [0, 1] and all(p.leader >= 0 for p in partitions.values()), name
        assert DELETED not in metadata.topics
        await session.close()
    finally:
        proxy.restore()
        # librdkafka's admin client has no close: dropping the last reference, and collecting the cycles a caught
        # exception leaves, destroys it before its brokers go.
        del admin
        gc.collect()
        for broker in brokers:
            await broker.stop(controlled=False)
        await direct.close()


async def _true(value: bool) -> bool:
    return value
