"""The leader's cache of incremental fetch sessions (KIP-227), as Kafka's FetchSessionCache keeps them.

A fetcher that reads thousands of partitions (a follower, a consumer with a wide assignment) would otherwise send
every partition on every request and get every partition back. With a session the broker remembers what the fetcher
last asked for (fetch offset, log start, max bytes, leader epoch per partition) and what it last told it (high
watermark, last stable offset, log start): the next request carries only partitions whose fetch state changed plus
``forgotten_topics_data``, and the response only partitions with records, an error, or a changed high watermark,
last stable offset or log start offset.

The request's ``(session_id, session_epoch)`` pick the kind of fetch, as Kafka's FetchManager.newContext does:

* epoch 0 (INITIAL) or -1 (FINAL) is a *full* fetch; a non-zero session id named in it is closed first. A full
  fetch with epoch 0 may create a session (the response carries its id, next epoch 1); with -1 it never does.
* any other epoch is *incremental*: an unknown id is FETCH_SESSION_ID_NOT_FOUND, an epoch other than the session's
  INVALID_FETCH_SESSION_EPOCH, a session of topic ids used below v13 or of names from v13 on
  FETCH_SESSION_TOPIC_ID_ERROR. A session that its forgotten partitions leave empty is closed and the fetch answered
  as a sessionless one.

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions (0 turns sessions off). When it is full, a
new session may take the slot of a session unused for ``EVICTION_MS`` (the least recently used first), else of the
least valuable evictable session: a follower's (privileged) session outranks a consumer's, a larger one a smaller
one, and a session younger than ``EVICTION_MS`` is evictable only by a privileged newcomer and only if it is not
privileged itself (Kafka's evictableByAll / evictableByPrivileged). Time is the injected clock's.

**Only what changed is visited.** A follower's session holds every partition it replicates from this leader, tens
of thousands on a big broker, and almost all of them are idle at any moment. Kafka's leader still walks every one of
them on each fetch (and parks the delayed fetch on each); in Python that walk is the cost of replication at scale
(13 us per partition per fetch on this kind of machine, two followers' fetches of 100,000 partitions saturate a
broker). So a session keeps ``dirty``: the partitions a fetch must read. A partition is dirty when the request
names it (its fetch state changed), when it is new to the session, or when the replica it watches reports an event
(an append for a follower, the high watermark moving, a change of leadership, ISR or log), and it stays dirty while
the last read found records, an error or news to tell. A fetch reads the dirty partitions only; the others are, by
construction, exactly as the fetcher was last told, so reading them would add nothing to the response. The watch
is kept on the replica between fetches (``CachedPartition.watched``), and the session's parked fetch (``waiter``)
is woken through it: one future per fetch instead of one per partition.

Pure state and decisions: :mod:`odradek.broker.apis.fetch` reads the logs and encodes, and
:class:`odradek.broker.replica.Partition` reports events through :meth:`FetchSession.on_event`.
"""

from __future__ import annotations

import asyncio
import enum
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from odradek.clock import Clock
from odradek.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000
"""Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: a session this idle may be evicted by anyone."""
MAX_EPOCH = 2**31 - 1

TopicKey = str | uuid.UUID
"""A session's topics are named below Fetch v13 and identified by topic id from v13 on."""

APPEND = 1
"""A partition event: records were appended (a follower has something to fetch)."""
HIGH_WATERMARK = 2
"""The high watermark moved (a consumer has something to read; a follower must be told)."""
REPLICA = 4
"""The replica changed: leadership, the replica removed, or its log changed under it (log start, offline, moved to
another directory). Every parked fetch re-reads, as Kafka completes DelayedFetch on a leader change."""
ISR = 8
"""The ISR changed: a follower's partition is read again (an out-of-sync follower is re-checked on each fetch), but
nobody is woken."""


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: the epoch after ``epoch``, wrapping to 1; FINAL stays FINAL."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_EPOCH else epoch + 1


@dataclass(slots=True, eq=False)
class CachedPartition:
    """One partition of a session. The first five fields mirror a Fetch request's partition (so the reader takes a
    cached partition where it takes a requested one); the next three are what the fetcher was last told; ``key``
    is its topic in the session and ``watched`` the replica it watches for events (compared by identity: an entry
    is a member of its session's dirty set and of a replica's watchers)."""

    partition: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    leader_log_start_offset: int = -1
    key: TopicKey = ""
    watched: Any = None
    """The :class:`~odradek.broker.replica.Partition` this entry is registered with, if any."""

    def take_request(self, other: CachedPartition) -> None:
        self.fetch_offset = other.fetch_offset
        self.log_start_offset = other.log_start_offset
        self.partition_max_bytes = other.partition_max_bytes
        self.current_leader_epoch = other.current_leader_epoch

    def must_respond(self, error_code: int, high_watermark: int, last_stable_offset: int, log_start_offset: int,
                     records_size: int) -> bool:
        """Whether an incremental response must carry this partition, remembering what it then tells the fetcher.
        An error resets the remembered high watermark, so the partition is sent again once the error clears."""
        respond = records_size > 0
        if self.high_watermark != high_watermark:
            self.high_watermark = high_watermark
            respond = True
        if self.last_stable_offset != last_stable_offset:
            self.last_stable_offset = last_stable_offset
            respond = True
        if self.leader_log_start_offset != log_start_offset:
            self.leader_log_start_offset = log_start_offset
            respond = True
        if error_code:
            self.high_watermark = -1
            respond = True
        return respond


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    replica_id: int
    """The follower's broker id, or -1 for a consumer's session."""
    uses_topic_ids: bool
    created_ms: int
    last_used_ms: int
    """When its last fetch arrived: a follower that was caught up on an idle partition was still caught up then."""
    epoch: int = 1
    topics: dict[TopicKey, dict[int, CachedPartition]] = field(default_factory=dict)
    size: int = 0
    dirty: dict[CachedPartition, None] = field(default_factory=dict)
    """The partitions the next fetch reads, in the order it reads them (an insertion-ordered set)."""
    waiter: asyncio.Future[None] | None = None
    """The session's parked fetch, woken by the events in ``wakes_on``."""
    wakes_on: int = 0
    read_committed: bool = False
    """The parked fetch reads to the last stable offset: a high watermark move wakes it only if that moved."""
    acl_index: object = None
    """The authorizer's ACLs the clean partitions were last checked against: new ACLs make every one dirty."""

    @property
    def privileged(self) -> bool:
        """A follower's session: it outranks consumers' sessions when the cache is full."""
        return self.replica_id >= 0

    def on_event(self, entry: CachedPartition, event: int, replica: Any) -> None:
        """A watched partition changed: the next fetch reads it, and the parked fetch wakes if it waits for this.
        A consumer reads to the high watermark: an append or an ISR change alone changes nothing it would read."""
        if event & (APPEND | ISR) and self.replica_id < 0:
            return
        self.dirty[entry] = None
        waiter = self.waiter
        if waiter is None or waiter.done() or not event & self.wakes_on:
            return
        if event == HIGH_WATERMARK and self.read_committed \
                and replica.last_stable_offset == entry.last_stable_offset:
            return  # the high watermark moved inside an open transaction: nothing new below the LSO
        waiter.set_result(None)

    def mark_all_dirty(self) -> None:
        for parts in self.topics.values():
            for entry in parts.values():
                self.dirty[entry] = None

    def close(self) -> None:
        """The session is gone: its entries stop watching their replicas, and a parked fetch answers now."""
        for parts in self.topics.values():
            for entry in parts.values():
                stop_watching(entry)
        self.dirty.clear()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def update(self, requested: Iterable[tuple[TopicKey, CachedPartition]],
               forgotten: Iterable[tuple[TopicKey, int]]) -> None:
        """Apply an incremental request: partitions it names are added or take its fetch state (keeping what the
        fetcher was last told), forgotten ones leave."""
        topics = self.topics
        dirty = self.dirty
        for key, wanted in requested:
            parts = topics.get(key)
            if parts is None:
                parts = topics[key] = {}
            cached = parts.get(wanted.partition)
            if cached is None:
                wanted.key = key
                parts[wanted.partition] = cached = wanted
                self.size += 1
            else:
                cached.take_request(wanted)
            dirty[cached] = None
        for key, index in forgotten:
            parts = topics.get(key)
            if parts is not None and (gone := parts.pop(index, None)) is not None:
                self.size -= 1
                dirty.pop(gone, None)
                stop_watching(gone)
                if not parts:
                    del topics[key]

    def settle(self, clean: Iterable[CachedPartition], served: Iterable[CachedPartition]) -> None:
        """After a response: partitions it left with nothing to read and nothing untold are no longer dirty, and
        those just served records move to the back, so a response bounded by ``max_bytes`` starts with the others
        next time (Kafka's fairness among a session's partitions)."""
        dirty = self.dirty
        for entry in clean:
            dirty.pop(entry, None)
        for entry in served:
            if entry in dirty:
                del dirty[entry]
                dirty[entry] = None


class ContextKind(enum.Enum):
    SESSIONLESS = "sessionless"
    """A full fetch that creates no session (FINAL epoch, or a session its forgotten partitions emptied)."""
    FULL = "full"
    """A full fetch that may create a session once it is answered (:meth:`FetchSessionCache.maybe_create`)."""
    INCREMENTAL = "incremental"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class FetchContext:
    kind: ContextKind
    session: FetchSession | None = None
    error_code: int = 0


SESSIONLESS = FetchContext(ContextKind.SESSIONLESS)
FULL = FetchContext(ContextKind.FULL)


class FetchSessionCache:
    def __init__(self, max_slots: int, clock: Clock, eviction_ms: int = EVICTION_MS,
                 rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.clock = clock
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self.sessions: dict[int, FetchSession] = {}
        """By id, least recently used first (a used session moves to the end)."""
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def partitions(self) -> int:
        return sum(s.size for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()
        return session

    def new_context(self, session_id: int, epoch: int, uses_topic_ids: bool,
                    requested: Iterable[tuple[TopicKey, CachedPartition]],
                    forgotten: Iterable[tuple[TopicKey, int]]) -> FetchContext:
        """Decide what a Fetch request is; an incremental request's partitions are applied to its session here,
        and the session's epoch moves on, so a replayed request is refused with INVALID_FETCH_SESSION_EPOCH."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            return SESSIONLESS if epoch == FINAL_EPOCH else FULL
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(ContextKind.ERROR, error_code=int(ErrorCode.fetch_session_id_not_found))
        if session.epoch != epoch:
            return FetchContext(ContextKind.ERROR, error_code=int(ErrorCode.invalid_fetch_session_epoch))
        if session.uses_topic_ids != uses_topic_ids:
            return FetchContext(ContextKind.ERROR, error_code=int(ErrorCode.fetch_session_topic_id_error))
        session.update(requested, forgotten)
        if session.size == 0:
            self.remove(session.id)
            return SESSIONLESS
        self._touch(session)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(ContextKind.INCREMENTAL, session)

    def maybe_create(self, replica_id: int, uses_topic_ids: bool,
                     partitions: Iterable[tuple[TopicKey, CachedPartition]]) -> int:
        """After a full fetch with the INITIAL epoch: a new session holding ``partitions`` (their response fields
        already set to what the full response told, every one dirty, so the first incremental fetch reads them all
        and starts watching them), or INVALID_SESSION_ID when the cache has no slot for it."""
        if self.max_slots <= 0:
            return INVALID_SESSION_ID
        topics: dict[TopicKey, dict[int, CachedPartition]] = {}
        size = 0
        for key, cached in partitions:
            parts = topics.get(key)
            if parts is None:
                parts = topics[key] = {}
            if cached.partition not in parts:
                size += 1
            cached.key = key
            parts[cached.partition] = cached
        now = self.clock.monotonic_ms()
        if len(self.sessions) >= self.max_slots and not self._try_evict(replica_id >= 0, size, now):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        session = FetchSession(session_id, replica_id, uses_topic_ids, now, now, 1, topics, size)
        session.mark_all_dirty()
        self.sessions[session_id] = session
        return session_id

    def _new_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, MAX_EPOCH - 1)
            if candidate not in self.sessions:
                return candidate

    def _touch(self, session: FetchSession) -> None:
        session.last_used_ms = self.clock.monotonic_ms()
        del self.sessions[session.id]
        self.sessions[session.id] = session

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        """Free one slot for a newcomer, or say it cannot have one (Kafka's tryEvict)."""
        oldest = next(iter(self.sessions.values()), None)
        if oldest is None:
            return False
        if now - oldest.last_used_ms > self.eviction_ms:
            self._evict(oldest)
            return True
        # the least valuable session the newcomer may evict: not privileged before privileged, then smallest
        victim: FetchSession | None = None
        for s in self.sessions.values():
            mature = now - s.created_ms > self.eviction_ms
            if not (mature or (privileged and not s.privileged)):
                continue
            if victim is None or (s.privileged, s.size, s.id) < (victim.privileged, victim.size, victim.id):
                victim = s
        # a newcomer must be worth strictly more (Kafka's key for it carries id 0, below every real id)
        if victim is None or (privileged, size) <= (victim.privileged, victim.size):
            return False
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self.sessions[session.id]
        session.close()
        self.evictions += 1


@dataclass(slots=True, eq=False)
class ParkedFetch:
    """One follower fetch waiting at this leader; ``answer_now`` says it must answer instead of parking again."""

    woken: asyncio.Future[None]
    answer_now: bool = False


class ParkedFollowerFetches:
    """The followers' fetches parked at this leader, by follower id.

    A follower has one fetch in flight per leader, and that fetch names only the partitions its fetcher had when it
    sent it (or, in a session, the ones the session already holds). A partition the follower starts replicating
    while its fetch is parked (a new topic, a new leader) is asked for only in its next fetch, so an append to it
    would wait out ``replica.fetch.wait.max.ms`` before any follower saw it, and an acks=all produce with it. The
    leader's partition therefore answers, on an append, the parked fetches of every follower not yet watching it
    (:meth:`answer`): the follower's next fetch names the partition and reads the append at once.
    """

    def __init__(self) -> None:
        self._by_replica: dict[int, list[ParkedFetch]] = {}

    def park(self, replica_id: int, woken: asyncio.Future[None]) -> ParkedFetch:
        parked = ParkedFetch(woken)
        self._by_replica.setdefault(replica_id, []).append(parked)
        return parked

    def unpark(self, replica_id: int, parked: ParkedFetch) -> None:
        waiting = self._by_replica.get(replica_id)
        if waiting is not None:
            waiting.remove(parked)
            if not waiting:
                del self._by_replica[replica_id]

    def waiting(self, replica_id: int) -> bool:
        """Whether a fetch of this follower is parked here now."""
        return replica_id in self._by_replica

    def answer(self, replica_id: int) -> None:
        """Make the follower's parked fetches answer now (with whatever they hold, possibly nothing)."""
        for parked in self._by_replica.get(replica_id, ()):
            parked.answer_now = True
            if not parked.woken.done():
                parked.woken.set_result(None)


def stop_watching(entry: CachedPartition) -> None:
    """The entry no longer hears of the replica it watched (it left its session, or watches another replica)."""
    if entry.watched is not None:
        entry.watched.unwatch(entry)
        entry.watched = None
