"""The broker's view of the cluster: brokers, topics, partition leaders, replicas and ISRs.

Metadata responses, FindCoordinator and leader checks all read from here. On one broker it is filled directly by
topic administration; in a cluster the controller's UpdateMetadata requests fill it. Readers never see a partial
update: each change replaces whole entries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    """A live broker. ``host``/``port`` are its inter-broker listener's (where peers fetch from); ``listeners``
    holds every advertised endpoint as ``(listener name, host, port)`` (empty when only one address is known)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[tuple[str, str, int], ...] = ()

    def on_listener(self, listener: str) -> BrokerEndpoint | None:
        """This broker as a client of ``listener`` sees it; None when it has no such listener (Kafka leaves such
        brokers out of the answer)."""
        if not self.listeners:
            return self
        for name, host, port in self.listeners:
            if name == listener:
                return dataclasses.replace(self, host=host, port=port)
        return None


@dataclass(slots=True)
class PartitionMeta:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)


@dataclass(slots=True)
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionMeta]
    internal: bool = False


class MetadataCache:
    def __init__(self, cluster_id: str, controller_id: int = -1) -> None:
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicMeta] = {}
        self._version = 0
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def version(self) -> int:
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        """Every change bumps the version, which wakes whoever waits for the metadata to reach some state."""
        self._version = value
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append(fut)
            try:
                await asyncio.wait_for(fut, remaining)
            except TimeoutError:
                return predicate()
        return True

    def set_broker(self, endpoint: BrokerEndpoint) -> None:
        self.brokers[endpoint.broker_id] = endpoint
        self.version += 1

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id, None)
        self.version += 1

    def set_topic(self, topic: TopicMeta) -> None:
        self.topics[topic.name] = topic
        self.version += 1

    def remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self.version += 1

    def leader_for(self, topic: str, partition: int) -> int | None:
        meta = self.topics.get(topic)
        if meta is None:
            return None
        p = meta.partitions.get(partition)
        if p is None or p.leader < 0:
            return None
        return p.leader

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        ep = self.brokers.get(broker_id)
        return None if ep is None else (ep.host, ep.port)

    def brokers_on(self, listener: str) -> list[BrokerEndpoint]:
        """The live brokers with an endpoint on ``listener``, by id, each with that endpoint's address."""
        found = (b.on_listener(listener) for _id, b in sorted(self.brokers.items()))
        return [b for b in found if b is not None]

    def endpoint_on(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        ep = self.brokers.get(broker_id)
        on = ep.on_listener(listener) if ep is not None else None
        return None if on is None else (on.host, on.port)

    def partition_count(self, topic: str) -> int | None:
        meta = self.topics.get(topic)
        return None if meta is None else len(meta.partitions)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMeta | None:
        for meta in self.topics.values():
            if meta.topic_id == topic_id:
                return meta
        return None
