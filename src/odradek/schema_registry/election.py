"""One primary among the registry instances on a cluster, elected through a Kafka consumer group.

Every instance joins the group ``odradek-schema-registry`` subscribed to the one-partition ``_schemas`` topic; the
group coordinator's assignment gives that partition to exactly one member, and that member is the primary. Its
``client.id`` is its URL, so the others find where to forward writes by describing the group
(:mod:`odradek.schema_registry.primary`). A member that leaves
or stops heartbeating loses the partition at the next rebalance, and another becomes primary (Confluent's registry
elects the same way, through the group protocol, with a protocol type of its own that librdkafka cannot speak; the
group id differs from Confluent's so the two never share a group).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from odradek.schema_registry.primary import PrimaryUnknown, describe_primary, outgoing_security
from odradek.schema_registry.store import REFUSALS

log = logging.getLogger(__name__)

GROUP = "odradek-schema-registry"


class Election:
    def __init__(self, config: Mapping[str, Any], topic: str, url: str, group: str = GROUP) -> None:
        self.config = dict(config)
        self.topic = topic
        self.url = url
        self.group = group
        self.primary = asyncio.Event()
        self.changed = asyncio.Event()
        self.term = 0  # counts the times this instance became primary
        self.refused: str | None = None  # the authorizer's refusal of the group or topic, until an assignment
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._security = outgoing_security(self.config)

    @property
    def is_primary(self) -> bool:
        return self.primary.is_set()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        consumer = Consumer({**self.config, "group.id": self.group, "client.id": self.url,
                             "enable.auto.commit": False, "session.timeout.ms": 10000,
                             "heartbeat.interval.ms": 1000, "partition.assignment.strategy": "range"})
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_revoke)
        self._thread = threading.Thread(target=self._run, args=(consumer,), name="schema-registry-election",
                                        daemon=True)
        self._thread.start()

    async def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join)

    def _run(self, consumer: Consumer) -> None:
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.2)  # serves the group's heartbeats and rebalances; the partition is paused
                error = msg.error() if msg is not None else None
                if error is not None and error.code() in REFUSALS:
                    self._call(self._refuse, str(error.str()))
        finally:
            consumer.close()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        mine = any(p.topic == self.topic for p in partitions)
        if partitions:
            consumer.pause(partitions)
        self._set(mine, joined=True)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._set(False)

    def _refuse(self, reason: str) -> None:
        if reason != self.refused:
            log.error("schema registry %s cannot join the election group %s: %s (it needs READ on the group and "
                      "DESCRIBE on %s); writes answer 50004 until ACLs allow it", self.url, self.group, reason,
                      self.topic)
        self.refused = reason
        self.changed.set()

    def _call(self, function: Callable[..., None], *args: Any) -> None:
        """Run ``function`` on the event loop (from the consumer's thread); nothing once the loop is closed."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(function, *args)
        except RuntimeError:
            pass

    def _set(self, primary: bool, joined: bool = False) -> None:
        def apply() -> None:
            if joined:
                self.refused = None
            if primary != self.primary.is_set():
                log.info("schema registry %s is %s", self.url, "the primary" if primary else "not the primary")
            if primary and not self.primary.is_set():
                self.term += 1
            if primary:
                self.primary.set()
            else:
                self.primary.clear()
            self.changed.set()

        self._call(apply)

    async def primary_url(self) -> str | None:
        """The URL of the member holding the partition, as the group coordinator describes the group now."""
        if self.is_primary:
            return self.url

        def describe() -> str | None:
            try:
                return describe_primary(str(self.config["bootstrap.servers"]), self._security, self.group,
                                        self.topic, 10.0)
            except PrimaryUnknown as exc:
                log.warning("%s", exc)
                return None

        return await asyncio.to_thread(describe)
