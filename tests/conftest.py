"""Shared fixtures: real odradek brokers as subprocesses on random loopback ports."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from brokers import BrokerProcess
from kafka_clients import close_opened


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
