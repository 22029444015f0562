"""Partitions this broker hosts: leadership, the ISR, the high watermark and the waiters that depend on it.

The high watermark is the minimum log end offset over the ISR and never moves backwards; while the ISR is smaller
than the effective minimum (``min(min.insync.replicas, replication factor)``) it does not move at all, so nothing
a consumer reads can depend on fewer replicas than the topic promises. Produce requests with acks=all and
long-polling fetches wait on it: :meth:`Partition.wait_for_hw` and the data waiters are woken each time it advances.

The leader alone changes the ISR (ZooKeeper-era Kafka): it shrinks out followers that have not caught up within
``replica.lag.time.max.ms`` and expands a follower back in once it reaches the high watermark and the current
leader epoch's start offset. A change takes effect only after the ``isr_writer`` (compare-and-set on the partition
state znode) succeeds, exactly as Kafka updates its cache only after ZooKeeper accepted the write.

Transactions: the leader writes the coordinator's COMMIT/ABORT markers (:meth:`Partition.write_txn_marker`), and
the last stable offset (the high watermark held back at the first open or unreplicated transaction) is what
READ_COMMITTED fetches read to; those fetches wait on :meth:`Partition.add_stable_waiter`, woken only when the last
stable offset advances, so a consumer parked behind an open transaction is not woken by every append.

Incremental fetch sessions watch their partitions instead of re-reading them on every fetch
(:mod:`odradek.broker.fetch_sessions`): each event here (an append, the high watermark moving, a change of
leadership, ISR or log) is told to the sessions watching, which read the partition on their next fetch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from odradek.broker.fetch_sessions import (
    APPEND,
    HIGH_WATERMARK,
    ISR,
    REPLICA,
    CachedPartition,
    FetchSession,
    ParkedFollowerFetches,
    stop_watching,
)
from odradek.broker.log import AppendResult, PartitionLog
from odradek.broker.log.partition_log import ORIGIN_CLIENT
from odradek.clock import Clock
from odradek.coordination.store import ConnectionLossError, SessionExpiredError
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchHeader
from odradek.tasks import spawn

log = logging.getLogger(__name__)

# Given (partition, proposed ISR), persist it and return the new znode version, or None when the write lost.
IsrWriter = Callable[["Partition", list[int]], Awaitable[int | None]]


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = 0
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    # The leader's log end offset when the previous fetch arrived (Kafka's lastFetchLeaderLogEndOffset); -1 unknown.
    last_fetch_leader_leo: int = -1
    # The follower's log start offset, as its fetches report it (DeleteRecords waits for it); -1 unknown.
    log_start_offset: int = -1


class Partition:
    def __init__(self, topic: str, index: int, plog: PartitionLog, broker_id: int, clock: Clock) -> None:
        self.topic = topic
        self.index = index
        self.log = plog
        plog.on_change = self._log_changed
        self.broker_id = broker_id
        self.clock = clock
        self.leader_id = -1
        self.leader_epoch = -1
        self.zk_version = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.min_isr = 1
        # The log end offset when this broker started leading in the current epoch (Kafka's
        # leaderEpochStartOffsetOpt); None while following.
        self.epoch_start_offset: int | None = None
        self.followers: dict[int, FollowerState] = {}
        self.isr_writer: IsrWriter | None = None
        self._isr_change_pending = False
        self._data_waiters: set[asyncio.Future[None]] = set()  # follower fetches: woken by appends
        self._visible_waiters: set[asyncio.Future[None]] = set()  # consumer fetches: woken by the HW moving
        self._stable_waiters: dict[asyncio.Future[None], int] = {}  # READ_COMMITTED fetch -> the LSO it saw
        self._hw_waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._watchers: dict[CachedPartition, FetchSession] = {}
        """Fetch sessions' entries for this partition, told of every event (see :meth:`watch`)."""
        self._watching_followers: dict[int, int] = {}
        """How many of ``_watchers`` belong to each follower's session: a follower absent here has not yet fetched
        this partition in a session, and its parked fetch must answer on an append (see :attr:`parked`)."""
        self.parked: ParkedFollowerFetches | None = None
        """The broker's parked follower fetches (set by the replica manager)."""
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    def make_leader(self, leader_epoch: int, replicas: list[int], isr: list[int], zk_version: int = -1) -> None:
        new_epoch = leader_epoch != self.leader_epoch
        if not self.is_leader or new_epoch or self.epoch_start_offset is None:
            self.epoch_start_offset = self.log.log_end_offset
        self.leader_id = self.broker_id
        self.leader_epoch = leader_epoch
        self.zk_version = zk_version
        self.replicas = list(replicas)
        self.isr = list(isr)
        self._refresh_min_isr()
        now = self.clock.monotonic_ms()
        # Followers start as caught up now: a new leader gives every replica a full lag window (Kafka does too).
        self.followers = {r: FollowerState(0, now, now) for r in replicas if r != self.broker_id}
        if self.log.latest_epoch < leader_epoch:
            self.log.assign_epoch(leader_epoch, self.log.log_end_offset)
        if new_epoch:
            # fetches parked under the old epoch re-check now: theirs is fenced (Kafka completes DelayedFetch on
            # a leader change), instead of holding a follower until its wait runs out
            self._wake_fetches()
        else:
            # the followers' states start again from nothing: the sessions must read the partition to rebuild them
            self._tell_watchers(REPLICA)
        self.maybe_advance_hw()

    def make_follower(self, leader_id: int, leader_epoch: int, replicas: list[int], isr: list[int]) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.epoch_start_offset = None
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.followers = {}
        self._refresh_min_isr()
        self.fail_waiters()

    def _refresh_min_isr(self) -> None:
        self.min_isr = max(1, min(int(self.log.config.min_insync_replicas), len(self.replicas) or 1))

    def check_leader(self, leader_epoch: int = -1) -> None:
        """Clients learn to refresh metadata from these codes (Kafka's Partition.checkCurrentLeaderEpoch)."""
        if leader_epoch >= 0:
            if leader_epoch < self.leader_epoch:
                raise KafkaError(ErrorCode.fenced_leader_epoch)
            if leader_epoch > self.leader_epoch:
                raise KafkaError(ErrorCode.unknown_leader_epoch)
        if not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        """min(high watermark, first offset of the earliest open or unreplicated transaction)."""
        return self.log.last_stable_offset

    @property
    def high_watermark_lagging(self) -> bool:
        """A new leader's high watermark can sit below what its predecessor already exposed until the ISR's next
        fetches (KIP-207); until it reaches this epoch's start offset, answering "latest" could move a consumer's
        view of the log backwards, so ListOffsets says OFFSET_NOT_AVAILABLE (retriable) instead."""
        return self.epoch_start_offset is not None and self.epoch_start_offset > self.log.high_watermark

    def maybe_advance_hw(self) -> bool:
        """HW = min LEO over the ISR, held while the ISR is below the effective minimum."""
        if not self.is_leader or len(self.isr) < self.min_isr:
            return False
        candidate = self.log.log_end_offset
        for replica in self.isr:
            if replica != self.broker_id:
                state = self.followers.get(replica)
                candidate = min(candidate, state.log_end_offset if state else 0)
        if candidate > self.high_watermark:
            self.log.high_watermark = candidate
            self._wake(candidate)
            return True
        return False

    # --- followers, seen from the leader ---------------------------------------------------------------------

    def record_follower_fetch(self, replica_id: int, fetch_offset: int, log_start_offset: int = -1) -> None:
        """A follower's fetch offset is its log end offset: the leader's only evidence of replication."""
        if not self.is_leader or replica_id == self.broker_id:
            return
        now = self.clock.monotonic_ms()
        state = self.followers.get(replica_id)
        if state is None:
            state = self.followers[replica_id] = FollowerState(0, now, now)
            moved = True
        else:
            moved = fetch_offset != state.log_end_offset
        state.log_start_offset = log_start_offset
        leo = self.log.log_end_offset
        # Under steady produce a fetch never asks for the leader's current end, only for its end as of the
        # previous fetch: reaching that means the follower was caught up then (Kafka's Replica rule), else a
        # follower milliseconds behind would count as lagging for as long as producers keep writing.
        if fetch_offset >= leo:
            state.last_caught_up_ms = now
        elif fetch_offset >= state.last_fetch_leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now
        state.last_fetch_leader_leo = max(state.last_fetch_leader_leo, leo)
        if replica_id not in self.isr and replica_id in self.replicas and self._caught_up_for_isr(fetch_offset):
            self._propose_isr([*self.isr, replica_id], f"replica {replica_id} caught up at {fetch_offset}")
        if moved:  # the high watermark is the ISR's least log end: a follower standing still cannot raise it
            self.maybe_advance_hw()

    def low_watermark(self) -> int:
        """The lowest log start offset among the ISR (Kafka's lowWatermarkIfLeader): DeleteRecords is done once
        it reaches the requested offset. A follower whose start offset is not known yet holds it at -1."""
        low = self.log.log_start_offset
        for replica in self.isr:
            if replica != self.broker_id:
                state = self.followers.get(replica)
                low = min(low, state.log_start_offset if state is not None else -1)
        return low

    def append_as_leader(self, records: bytearray, headers: list[BatchHeader], now_ms: int,
                         origin: str = ORIGIN_CLIENT) -> AppendResult:
        """Append in this leader epoch, then move the high watermark or wake followers waiting for data.
        ``origin`` is ORIGIN_COORDINATOR for the group coordinator's own (transactional offset) batches."""
        result = self.log.append_as_leader(records, headers, self.leader_epoch, now_ms, origin)
        self.notify_follower_data()
        self.maybe_advance_hw()
        return result

    def write_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool) -> int:
        """Append the coordinator's COMMIT or ABORT marker as leader; returns its offset (the caller waits for
        ``wait_for_hw(offset + 1, ...)``: markers are written with acks=all). Raises NOT_LEADER_OR_FOLLOWER,
        INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED as Kafka does."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {self.broker_id} is not the leader of {self.name}")
        offset = self.log.append_marker(producer_id, producer_epoch, coordinator_epoch, commit, self.leader_epoch,
                                        self.clock.now_ms())
        self.notify_follower_data()
        self.maybe_advance_hw()
        return offset

    def _caught_up_for_isr(self, fetch_offset: int) -> bool:
        epoch_start = self._current_epoch_start()
        return fetch_offset >= self.high_watermark and fetch_offset >= epoch_start

    def _current_epoch_start(self) -> int:
        start = 0
        for epoch, offset in self.log.epoch_entries:
            if epoch == self.leader_epoch:
                start = offset
        return start

    def maybe_shrink_isr(self, lag_max_ms: int) -> None:
        """Drop followers that have not caught up within ``replica.lag.time.max.ms`` (stuck or slow alike)."""
        if not self.is_leader or self._isr_change_pending:
            return
        now = self.clock.monotonic_ms()
        leo = self.log.log_end_offset
        out = [
            r for r in self.isr
            if r != self.broker_id
            and (st := self.followers.get(r)) is not None
            and st.log_end_offset < leo
            and now - st.last_caught_up_ms > lag_max_ms
        ]
        if out:
            self._propose_isr([r for r in self.isr if r not in out], f"replicas {out} lagged over {lag_max_ms} ms")

    def _propose_isr(self, new_isr: list[int], reason: str) -> None:
        if self._isr_change_pending or self.isr_writer is None:
            return
        self._isr_change_pending = True
        epoch = self.leader_epoch
        spawn(self._write_isr(new_isr, reason, epoch), f"isr-{self.name}")

    async def _write_isr(self, new_isr: list[int], reason: str, epoch: int) -> None:
        assert self.isr_writer is not None
        try:
            version = await self.isr_writer(self, new_isr)
        except (ConnectionLossError, SessionExpiredError) as exc:
            # Expected while cut from ZooKeeper; the next ISR check proposes it again.
            log.warning("writing ISR %s for %s failed: %s", new_isr, self.name, type(exc).__name__)
            version = None
        except Exception:
            log.exception("writing ISR %s for %s failed", new_isr, self.name)
            version = None
        finally:
            self._isr_change_pending = False
        if version is None or epoch != self.leader_epoch or not self.is_leader:
            return
        log.info("ISR of %s: %s -> %s (%s)", self.name, self.isr, new_isr, reason)
        self.isr = new_isr
        self.zk_version = version
        self._tell_watchers(ISR)
        self.maybe_advance_hw()

    # --- waiting on the high watermark --------------------------------------------------------------------------

    # --- fetch sessions watching -------------------------------------------------------------------------------

    def watch(self, entry: CachedPartition, session: FetchSession) -> None:
        """Tell ``session`` of this partition's events until :meth:`unwatch` (the entry leaves its session) or until
        the entry watches another replica (this one was dropped and the partition created again)."""
        if entry.watched is not self:
            stop_watching(entry)
        entry.watched = self
        if session.replica_id >= 0 and entry not in self._watchers:
            self._watching_followers[session.replica_id] = self._watching_followers.get(session.replica_id, 0) + 1
        self._watchers[entry] = session
        if self._loop is None:
            self._loop = asyncio.get_running_loop()

    def unwatch(self, entry: CachedPartition) -> None:
        session = self._watchers.pop(entry, None)
        if session is not None and session.replica_id >= 0:
            left = self._watching_followers[session.replica_id] - 1
            if left:
                self._watching_followers[session.replica_id] = left
            else:
                del self._watching_followers[session.replica_id]

    def replace_log(self, plog: PartitionLog) -> None:
        """The replica moved to another log directory: serve from the reopened log from now on."""
        self.log.on_change = None
        self.log = plog
        plog.on_change = self._log_changed
        self._tell_watchers(REPLICA)

    def _log_changed(self) -> None:
        """The log's start moved or it went offline, possibly on a flusher thread: the sessions hear it on the loop."""
        loop = self._loop
        if loop is None or not self._watchers:
            return
        try:
            loop.call_soon_threadsafe(self._tell_watchers, REPLICA)
        except RuntimeError:
            pass  # the loop is closed: the broker is stopping, and its sessions with it

    def _tell_watchers(self, event: int) -> None:
        watchers = self._watchers
        if not watchers:
            return
        for entry, session in watchers.items():  # on_event only marks and wakes: the watchers stay as they are
            if event == APPEND and session.replica_id >= 0 and entry not in session.dirty:
                # a clean entry means the follower was at our log end on each of its fetches since: it was caught
                # up as of its last one, which visiting the partition would have recorded
                self._idle_follower_fetched(session.replica_id, session.last_used_ms)
            session.on_event(entry, event, self)

    def _idle_follower_fetched(self, replica_id: int, at_ms: int) -> None:
        state = self.followers.get(replica_id)
        if state is not None and state.log_end_offset >= state.last_fetch_leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, at_ms)
            state.last_fetch_ms = max(state.last_fetch_ms, at_ms)

    def _wake_fetches(self) -> None:
        for fut in (*self._data_waiters, *self._visible_waiters, *self._stable_waiters):
            if not fut.done():
                fut.set_result(None)
        self._data_waiters.clear()
        self._visible_waiters.clear()
        self._stable_waiters.clear()
        self._tell_watchers(REPLICA)

    def _wake(self, hw: int) -> None:
        """The high watermark moved: consumers' fetches (and acks=all produces) have something new. Followers'
        fetches are not woken here: an append already woke them, and a HW move alone gives them no data."""
        self._tell_watchers(HIGH_WATERMARK)
        for fut in self._visible_waiters:
            if not fut.done():
                fut.set_result(None)
        self._visible_waiters.clear()
        if self._stable_waiters:
            lso = self.log.last_stable_offset
            for fut, seen in list(self._stable_waiters.items()):
                if lso != seen:
                    del self._stable_waiters[fut]
                    if not fut.done():
                        fut.set_result(None)
        still: list[tuple[int, asyncio.Future[bool]]] = []
        for offset, waiter in self._hw_waiters:
            if waiter.done():
                continue
            if hw >= offset:
                waiter.set_result(True)
            else:
                still.append((offset, waiter))
        self._hw_waiters = still

    def notify_follower_data(self) -> None:
        """Followers' fetch waiters (replica fetches read to the log end) wake on every append, before the high
        watermark is recomputed, so a follower outside the ISR is woken even when the append moves the HW.
        A follower whose session does not watch this partition yet (it joined the follower's fetcher while that
        fetch was parked, or the fetch found it not led here yet) has its parked fetch answered, so its next fetch
        names the partition: waiting out ``replica.fetch.wait.max.ms`` instead would hold a new partition's first
        acks=all produce that long."""
        self._tell_watchers(APPEND)
        for fut in self._data_waiters:
            if not fut.done():
                fut.set_result(None)
        self._data_waiters.clear()
        parked = self.parked
        if parked is not None and len(self._watching_followers) < len(self.replicas) - 1:
            for replica in self.replicas:
                if replica != self.broker_id and replica not in self._watching_followers:
                    parked.answer(replica)

    def add_data_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.add(fut)

    def remove_data_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.discard(fut)

    def add_visible_waiter(self, fut: asyncio.Future[None]) -> None:
        """A READ_UNCOMMITTED consumer fetch: it reads to the high watermark, so only the HW moving wakes it (an
        append that no follower has replicated yet would only make it re-read nothing, Kafka's DelayedFetch)."""
        self._visible_waiters.add(fut)

    def remove_visible_waiter(self, fut: asyncio.Future[None]) -> None:
        self._visible_waiters.discard(fut)

    def add_stable_waiter(self, fut: asyncio.Future[None], seen_lso: int) -> None:
        """A READ_COMMITTED fetch that read up to ``seen_lso``: woken when the last stable offset moves (it moves
        only with the high watermark, once that passes a marker or data outside any open transaction). A move
        that happened before the call wakes it at once."""
        if self.log.last_stable_offset != seen_lso:
            if not fut.done():
                fut.set_result(None)
            return
        self._stable_waiters[fut] = seen_lso

    def remove_stable_waiter(self, fut: asyncio.Future[None]) -> None:
        self._stable_waiters.pop(fut, None)

    async def wait_for_hw(self, offset: int, timeout_s: float) -> bool:
        """True once the high watermark reaches ``offset``; False on timeout."""
        if self.high_watermark >= offset:
            return True
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        self._hw_waiters.append((offset, fut))
        # a timer on the future itself, not asyncio.wait_for: wait_for relays the result through a second future,
        # and every relay is one more pass of a busy event loop between the high watermark's move and the ack
        timer = loop.call_later(timeout_s, _expire, fut)
        try:
            return await fut
        finally:
            timer.cancel()

    def fail_waiters(self) -> None:
        """Wake everyone on leadership loss or deletion; they re-check and see the new state."""
        self._wake_fetches()
        for _offset, fut in self._hw_waiters:
            if not fut.done():
                fut.set_exception(KafkaError(ErrorCode.not_leader_or_follower))
        self._hw_waiters.clear()


def _expire(fut: asyncio.Future[bool]) -> None:
    """A high-watermark waiter's timeout: False, unless it was woken (True) or failed first."""
    if not fut.done():
        fut.set_result(False)
