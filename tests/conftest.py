"""Shared fixtures: real odradek brokers as subprocesses on random loopback ports; one real ZooKeeper for the session;
Apache Kafka 3.9 (ZooKeeper mode, on that ZooKeeper) and 4.x (KRaft) brokers, one of each for the session.

``async def`` tests run under pytest-asyncio (auto mode, pyproject.toml) on the loop odradek's brokers run on."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apache_kafka_brokers import kafka_39
from brokers import BrokerProcess
from kafka_clients import close_opened
from odradek.apache_kafka import KAFKA_4, KafkaCluster
from odradek.coordination.localzk import LocalZooKeeper
from odradek.event_loop import loop_factory


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """pytest-asyncio's loops are of the kind ``ODRADEK_EVENT_LOOP`` picks (uvloop unless it says asyncio).

    One factory, so each test runs once (not once per loop kind) and its id stays as it was.
    """
    return {"odradek": loop_factory()}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """The confluent-kafka clients the test opened are closed before its fixtures stop their brokers."""
    try:
        close_opened()
    finally:
        yield


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    started: list[BrokerProcess] = []

    def make(*extra_args: str, name: str = "broker") -> BrokerProcess:
        b = BrokerProcess(tmp_path / name, list(extra_args))
        started.append(b)
        return b.start()

    yield make
    # Client handles a test left in reference cycles (librdkafka's futures hold their handle) are destroyed here,
    # while their brokers still answer, not by a garbage collection at some random point of a later test.
    gc.collect()
    for b in started:
        if b.proc is not None and b.proc.poll() is None:
            b.proc.kill()
            b.proc.wait(10)


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    """A fresh single broker; consumer-group joins are not delayed (group.initial.rebalance.delay.ms=0)."""
    return broker_factory("--override", "group.initial.rebalance.delay.ms=0")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    """One real ZooKeeper for the whole test session; it fails (never skips) when it cannot start."""
    server = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def apache_kafka_39(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[KafkaCluster]:
    """One Apache Kafka 3.9 broker in ZooKeeper mode (a chroot of its own on the session's ZooKeeper), started once
    per session and killed at its end; tests share it, each on topics (and groups) named for itself."""
    with kafka_39(tmp_path_factory.mktemp("kafka-3.9"), zookeeper) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def apache_kafka_4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One Apache Kafka 4.x broker in KRaft combined mode, started once per session and killed at its end."""
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-4"), version=KAFKA_4).start()
    try:
        yield cluster
    finally:
        cluster.kill()
