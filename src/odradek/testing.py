"""A :class:`~odradek.cluster.LocalCluster` on its own event-loop thread, driven from blocking code.

Tests use blocking Kafka clients (confluent-kafka, kafka-python) while the brokers are asyncio servers, so the
cluster runs on a daemon thread with its own loop and every call crosses over with ``run_coroutine_threadsafe``.
This is what the ``odradek_cluster`` pytest fixture hands out (:mod:`odradek.pytest_plugin`) and what the
repository's own multi-broker tests build on: no JVM, no Docker, no subprocess, a three-broker cluster in about a
second.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from odradek import event_loop
from odradek.cluster import LocalCluster

if TYPE_CHECKING:
    from odradek.schema_registry.server import SchemaRegistry

T = TypeVar("T")

# Kafka's defaults suit production, not a test that kills a broker: a dead broker's session expires after
# zookeeper.session.timeout.ms (Kafka: 18 s) and the first consumer of a group waits
# group.initial.rebalance.delay.ms (Kafka: 3 s). These make failover and group joins quick; overrides win.
FAST_TEST_OVERRIDES: Mapping[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "zookeeper.session.timeout.ms": "2000",
    "replica.lag.time.max.ms": "3000",
}


class ThreadedCluster:
    """Brokers of a :class:`LocalCluster` serving on a background loop; every method blocks until done."""

    def __init__(self, brokers: int, data_dir: Path | str, **kwargs: Any) -> None:
        self.loop = event_loop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="odradek-cluster-loop", daemon=True)
        self.thread.start()
        self.cluster: LocalCluster = self.call(self._make(brokers, Path(data_dir), kwargs))
        self._registry: SchemaRegistry | None = None

    @staticmethod
    async def _make(brokers: int, data_dir: Path, kwargs: dict[str, Any]) -> LocalCluster:
        # Built on the loop: LocalCluster creates asyncio primitives that bind to the loop they are made on.
        return LocalCluster(brokers, data_dir, **kwargs)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """Call a plain function on the loop thread, where the brokers' state may be read safely."""

        async def wrapper() -> T:
            return fn(*args)

        return self.call(wrapper())

    def start(self) -> ThreadedCluster:
        self.call(self.cluster.start())
        return self

    @property
    def schema_registry_url(self) -> str:
        """The URL of a schema registry for this cluster, started on first use and stopped with the cluster."""
        if self._registry is None:
            from odradek.schema_registry.server import SchemaRegistry

            bootstrap = self.bootstrap_servers  # read here: on the loop, run() would wait for the loop itself

            async def start() -> SchemaRegistry:
                registry = SchemaRegistry(bootstrap)
                await registry.start()
                for broker in self.cluster.brokers.values():  # their consoles list its subjects
                    broker.schema_registry_view = registry.console_view
                return registry

            self._registry = self.call(start())
        return self._registry.url

    def close(self) -> None:
        try:
            if self._registry is not None:
                self.call(self._registry.stop(), timeout=60)
            self.call(self.cluster.stop(), timeout=60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)

    @property
    def bootstrap(self) -> str:
        """``host:port`` of every running broker, comma-separated (a client's ``bootstrap.servers``)."""
        return self.run(lambda: self.cluster.bootstrap)

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap

    @property
    def endpoints(self) -> dict[str, str]:
        """Every endpoint by the ready file's keys (:mod:`odradek.ready_file`): ``bootstrap.servers``, ``metrics``
        when served, ``bootstrap.servers.<LISTENER>`` per listener when ``listeners`` is set."""
        return self.run(self.cluster.endpoints)

    @property
    def metrics(self) -> str | None:
        """``http://host:port/metrics`` of every running broker, comma-separated; None unless started with
        ``metrics=True``."""
        return self.endpoints.get("metrics")

    @property
    def listeners(self) -> dict[str, str]:
        """Each listener's ``bootstrap.servers`` by listener name (empty unless ``listeners`` is set)."""
        prefix = "bootstrap.servers."
        return {key.removeprefix(prefix): value for key, value in self.endpoints.items() if key.startswith(prefix)}

    @property
    def broker_ids(self) -> list[int]:
        return list(self.cluster.broker_ids)

    def controller_id(self) -> int | None:
        return self.run(self.cluster.controller_id)

    def wait_for_controller(self, timeout: float = 30.0) -> int:
        """The active controller's id once there is one (after a kill, the survivors elect one)."""
        deadline = time.monotonic() + timeout
        while True:
            controller = self.controller_id()
            if controller is not None:
                return controller
            if time.monotonic() > deadline:
                raise TimeoutError(f"no active controller after {timeout}s")
            time.sleep(0.05)

    # --- faults: each acts like the failure it names (see LocalCluster) ---------------------------------------

    def kill(self, broker_id: int) -> None:
        """As SIGKILL: no controlled shutdown, nothing flushed; its session expires after its timeout."""
        self.call(self.cluster.kill(broker_id))

    def stop(self, broker_id: int, controlled: bool = True) -> None:
        """As SIGTERM: leaderships handed over first (when ``controlled``), logs flushed, checkpoints written."""
        self.call(self.cluster.stop_broker(broker_id, controlled))

    def stop_broker(self, broker_id: int, controlled: bool = True) -> None:
        self.stop(broker_id, controlled)

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped or killed broker again, on its old port and data directory."""
        self.call(self.cluster.start_broker(broker_id))

    def restart(self, broker_id: int, controlled: bool = True) -> None:
        """Stop the broker if it runs (cleanly), then start it again on its old port and data."""
        self.call(self.cluster.restart(broker_id, controlled))

    def pause(self, broker_id: int) -> None:
        self.run(self.cluster.pause, broker_id)

    def resume(self, broker_id: int) -> None:
        self.run(self.cluster.resume, broker_id)

    def isolate(self, broker_id: int) -> None:
        self.run(self.cluster.isolate, broker_id)

    def heal(self, broker_id: int) -> None:
        self.run(self.cluster.heal, broker_id)

    def expire_session(self, broker_id: int) -> None:
        self.run(self.cluster.expire_session, broker_id)


def start_cluster(
    data_dir: Path | str,
    brokers: int = 3,
    *,
    racks: Sequence[str] | None = None,
    overrides: Mapping[str, str] | None = None,
    metrics: bool = False,
) -> ThreadedCluster:
    """A started cluster with :data:`FAST_TEST_OVERRIDES` under ``overrides``; ``close()`` it when done. With
    ``metrics`` each broker serves ``/metrics`` and the console on a free port (:attr:`ThreadedCluster.metrics`)."""
    settings = dict(FAST_TEST_OVERRIDES)
    settings.update({k: str(v) for k, v in (overrides or {}).items()})
    cluster = ThreadedCluster(brokers, data_dir, racks=list(racks) if racks else None, overrides=settings,
                              metrics_ports=[0] * brokers if metrics else None)
    try:
        return cluster.start()
    except BaseException:
        cluster.close()
        raise
