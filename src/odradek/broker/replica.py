"""Partitions this broker hosts: leadership, the ISR, the high watermark and the waiters that depend on it.

The high watermark is the minimum log end offset over the ISR and never moves backwards. Produce requests with
acks=all and long-polling fetches wait on it: :meth:`Partition.wait_for_hw` and the partition's data waiters are
woken each time it advances, so nobody polls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.broker.log import PartitionLog
from odradek.clock import Clock
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = 0
    last_caught_up_ms: int = 0


class Partition:
    def __init__(self, topic: str, index: int, plog: PartitionLog, broker_id: int, clock: Clock) -> None:
        self.topic = topic
        self.index = index
        self.log = plog
        self.broker_id = broker_id
        self.clock = clock
        self.leader_id = -1
        self.leader_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.followers: dict[int, FollowerState] = {}
        self._data_waiters: set[asyncio.Future[None]] = set()
        self._hw_waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    def make_leader(self, leader_epoch: int, replicas: list[int], isr: list[int]) -> None:
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        now = self.clock.monotonic_ms()
        self.followers = {r: FollowerState(0, now) for r in replicas if r != self.broker_id}
        self.log.assign_epoch(leader_epoch, self.log.log_end_offset)
        self.maybe_advance_hw()

    def check_leader(self, leader_epoch: int = -1) -> None:
        """Clients learn to refresh metadata from these codes (Kafka's Partition.checkCurrentLeaderEpoch)."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        if leader_epoch >= 0:
            if leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch)
            if leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def maybe_advance_hw(self) -> bool:
        """HW = min LEO over the ISR; on a leader alone in its ISR that is its own LEO."""
        leo = self.log.log_end_offset
        candidate = leo
        for replica in self.isr:
            if replica != self.broker_id:
                candidate = min(candidate, self.followers.get(replica, FollowerState()).log_end_offset)
        if candidate > self.high_watermark:
            self.log.high_watermark = candidate
            self._wake(candidate)
            return True
        return False

    def record_follower_fetch(self, replica_id: int, fetch_offset: int) -> None:
        """A follower's fetch offset is its log end offset: the leader's only evidence of replication."""
        state = self.followers.setdefault(replica_id, FollowerState())
        state.log_end_offset = fetch_offset
        if fetch_offset >= self.log.log_end_offset:
            state.last_caught_up_ms = self.clock.monotonic_ms()
        self.maybe_advance_hw()

    def _wake(self, hw: int) -> None:
        for fut in self._data_waiters:
            if not fut.done():
                fut.set_result(None)
        self._data_waiters.clear()
        still: list[tuple[int, asyncio.Future[None]]] = []
        for offset, fut in self._hw_waiters:
            if fut.done():
                continue
            if hw >= offset:
                fut.set_result(None)
            else:
                still.append((offset, fut))
        self._hw_waiters = still

    def add_data_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.add(fut)

    def remove_data_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.discard(fut)

    async def wait_for_hw(self, offset: int, timeout_s: float) -> bool:
        """True once the high watermark reaches ``offset``; False on timeout."""
        if self.high_watermark >= offset:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._hw_waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            return False

    def fail_waiters(self) -> None:
        """Wake everyone on leadership loss or deletion; they re-check and see the new state."""
        for fut in self._data_waiters:
            if not fut.done():
                fut.set_result(None)
        self._data_waiters.clear()
        for _offset, fut in self._hw_waiters:
            if not fut.done():
                fut.set_exception(KafkaError(ErrorCode.not_leader_or_follower))
        self._hw_waiters.clear()


def wake_any(partitions: Iterable[Partition], fut: asyncio.Future[None]) -> None:
    for p in partitions:
        p.add_data_waiter(fut)
