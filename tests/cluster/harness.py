"""A LocalCluster running on its own event-loop thread, so tests drive it with blocking Kafka clients."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from odradek.cluster import LocalCluster

T = TypeVar("T")


class ThreadedCluster:
    def __init__(self, brokers: int, data_dir: Path, **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cluster-loop", daemon=True)
        self.thread.start()
        self.cluster = self.call(self._make(brokers, data_dir, kwargs))

    @staticmethod
    async def _make(brokers: int, data_dir: Path, kwargs: dict[str, Any]) -> LocalCluster:
        return LocalCluster(brokers, data_dir, **kwargs)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def run(self, fn: Any, *args: Any) -> Any:
        async def wrapper() -> Any:
            return fn(*args)

        return self.call(wrapper())

    def start(self) -> ThreadedCluster:
        self.call(self.cluster.start())
        return self

    @property
    def bootstrap(self) -> str:
        return self.run(lambda: self.cluster.bootstrap)

    def controller_id(self) -> int | None:
        return self.run(self.cluster.controller_id)

    def controller_epoch(self, broker_id: int) -> int:
        return self.run(lambda: self.cluster.brokers[broker_id].controller.epoch)

    def leader_of(self, topic: str, partition: int) -> int:
        """The leader as the brokers themselves see it (a live broker's metadata cache)."""

        def find() -> int:
            for b in self.cluster.brokers.values():
                if b.running and not b.faults.paused:
                    leader = b.metadata.leader_for(topic, partition)
                    if leader is not None:
                        return leader
            return -1

        return self.run(find)

    def leaders_seen(self, topic: str, partition: int) -> set[int]:
        """The leader in every running broker's metadata cache (one element once they all agree). A client may
        bootstrap from any of them, a just-restarted one included, whose cache is the last to hear of a change."""

        def find() -> set[int]:
            leaders = (b.metadata.leader_for(topic, partition)
                       for b in self.cluster.brokers.values() if b.running and not b.faults.paused)
            return {-1 if leader is None else leader for leader in leaders}

        return self.run(find)

    def partition_meta(self, topic: str, partition: int) -> Any:
        def find() -> Any:
            for b in self.cluster.brokers.values():
                if b.running and not b.faults.paused and topic in b.metadata.topics:
                    return b.metadata.topics[topic].partitions.get(partition)
            return None

        return self.run(find)

    def full_isr(self, topic: str, partitions: int) -> bool:
        """Every partition of ``topic`` has every broker of the cluster in its ISR (as the brokers see it)."""
        everyone = sorted(self.cluster.brokers)
        metas = [self.partition_meta(topic, p) for p in range(partitions)]
        return all(m is not None and sorted(m.isr) == everyone for m in metas)

    def kill(self, broker_id: int) -> None:
        self.call(self.cluster.kill(broker_id))

    def stop_broker(self, broker_id: int, controlled: bool = True) -> None:
        self.call(self.cluster.stop_broker(broker_id, controlled))

    def start_broker(self, broker_id: int) -> None:
        self.call(self.cluster.start_broker(broker_id))

    def expire_session(self, broker_id: int) -> None:
        self.run(self.cluster.expire_session, broker_id)

    def pause(self, broker_id: int) -> None:
        self.run(self.cluster.pause, broker_id)

    def resume(self, broker_id: int) -> None:
        self.run(self.cluster.resume, broker_id)

    def close(self) -> None:
        try:
            self.call(self.cluster.stop(), timeout=60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)

    # --- views used by the acceptance tests ----------------------------------------------------------------

    def broker(self, broker_id: int) -> Any:
        return self.cluster.brokers[broker_id]

    def znode(self, path: str) -> bytes | None:
        """The data at ``path`` in the coordination store (None when absent), read through a live broker's session."""

        async def read() -> bytes | None:
            from odradek.coordination import NoNodeError

            for b in self.cluster.brokers.values():
                if b.running and not b.faults.paused and b.membership.session is not None:
                    try:
                        data, _stat = await b.membership.session.get(path)
                    except NoNodeError:
                        return None
                    return data
            raise RuntimeError("no live broker to read the store through")

        return self.call(read())

    def controller_idle(self) -> None:
        """Wait until the active controller has processed every event queued so far."""

        async def idle() -> None:
            for b in self.cluster.brokers.values():
                if b.running and b.controller.is_active:
                    await b.controller.wait_idle()

        self.call(idle())
