"""The fetch session cache's decisions (KIP-227), driven by a manual clock: no broker, no socket."""

from __future__ import annotations

import asyncio
import random
import uuid

from odradek.broker.fetch_sessions import (
    APPEND,
    EVICTION_MS,
    FINAL_EPOCH,
    HIGH_WATERMARK,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    ISR,
    MAX_EPOCH,
    REPLICA,
    CachedPartition,
    ContextKind,
    FetchSessionCache,
    next_epoch,
)
from odradek.clock import ManualClock
from odradek.errors import ErrorCode

FOLLOWER = 1
CONSUMER = -1


def part(index: int, offset: int = 0, hw: int = -1) -> CachedPartition:
    p = CachedPartition(index, offset, 0, 1 << 20, 0)
    p.high_watermark = hw
    return p


def make(slots: int = 10) -> tuple[FetchSessionCache, ManualClock]:
    clock = ManualClock()
    return FetchSessionCache(slots, clock, rng=random.Random(7)), clock


def create(cache: FetchSessionCache, n: int, privileged: bool = False, topic: str = "t") -> int:
    return cache.maybe_create(FOLLOWER if privileged else CONSUMER, False, [(topic, part(i)) for i in range(n)])


def test_epochs_wrap_to_one_and_final_stays_final() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_full_fetch_with_the_initial_epoch_may_create_one_with_the_final_epoch_never() -> None:
    cache, _ = make()
    assert cache.new_context(0, INITIAL_EPOCH, False, [], []).kind is ContextKind.FULL
    assert cache.new_context(0, FINAL_EPOCH, False, [], []).kind is ContextKind.SESSIONLESS
    sid = create(cache, 3)
    assert sid != INVALID_SESSION_ID
    session = cache.get(sid)
    assert session is not None and session.epoch == 1 and session.size == 3


def test_a_full_fetch_naming_a_session_closes_it() -> None:
    cache, _ = make()
    sid = create(cache, 2)
    assert cache.new_context(sid, INITIAL_EPOCH, False, [], []).kind is ContextKind.FULL
    assert cache.get(sid) is None
    sid = create(cache, 2)
    assert cache.new_context(sid, FINAL_EPOCH, False, [], []).kind is ContextKind.SESSIONLESS
    assert len(cache) == 0


def test_incremental_fetches_check_the_id_and_the_epoch_and_move_the_epoch_on() -> None:
    cache, _ = make()
    sid = create(cache, 2)
    unknown = cache.new_context(sid + 1, 1, False, [], [])
    assert (unknown.kind, unknown.error_code) == (ContextKind.ERROR, ErrorCode.fetch_session_id_not_found)
    wrong = cache.new_context(sid, 2, False, [], [])
    assert (wrong.kind, wrong.error_code) == (ContextKind.ERROR, ErrorCode.invalid_fetch_session_epoch)
    ok = cache.new_context(sid, 1, False, [], [])
    assert ok.kind is ContextKind.INCREMENTAL and ok.session is not None and ok.session.epoch == 2
    replay = cache.new_context(sid, 1, False, [], [])
    assert replay.error_code == ErrorCode.invalid_fetch_session_epoch
    # a session of names cannot be continued with topic ids (v13+) and the other way round
    mixed = cache.new_context(sid, 2, True, [], [])
    assert mixed.error_code == ErrorCode.fetch_session_topic_id_error


def test_an_incremental_fetch_adds_updates_and_forgets_keeping_what_the_fetcher_was_told() -> None:
    cache, _ = make()
    sid = cache.maybe_create(FOLLOWER, False, [("a", part(0, 5, hw=9)), ("a", part(1, 7, hw=9))])
    ctx = cache.new_context(sid, 1, False, [("a", part(0, 9)), ("b", part(0, 0))], [("a", 1)])
    session = ctx.session
    assert session is not None
    assert {k: sorted(v) for k, v in session.topics.items()} == {"a": [0], "b": [0]}
    a0 = session.topics["a"][0]
    assert (a0.fetch_offset, a0.high_watermark) == (9, 9)
    assert session.size == 2


def test_forgetting_every_partition_closes_the_session() -> None:
    cache, _ = make()
    sid = create(cache, 2)
    ctx = cache.new_context(sid, 1, False, [], [("t", 0), ("t", 1), ("t", 5)])
    assert ctx.kind is ContextKind.SESSIONLESS
    assert cache.get(sid) is None


def test_a_partition_is_answered_only_when_what_the_fetcher_knows_changed() -> None:
    p = part(0, hw=10)
    p.last_stable_offset, p.leader_log_start_offset = 10, 0
    assert not p.must_respond(0, 10, 10, 0, 0)
    assert p.must_respond(0, 10, 10, 0, 100)  # records
    assert p.must_respond(0, 11, 10, 0, 0)  # high watermark
    assert not p.must_respond(0, 11, 10, 0, 0)
    assert p.must_respond(0, 11, 11, 0, 0)  # last stable offset
    assert p.must_respond(0, 11, 11, 3, 0)  # log start offset
    assert p.must_respond(int(ErrorCode.not_leader_or_follower), 11, 11, 3, 0)
    # the error forgot the high watermark: the partition is sent again once it clears, unchanged or not
    assert p.must_respond(0, 11, 11, 3, 0)
    assert not p.must_respond(0, 11, 11, 3, 0)


def test_partitions_served_records_move_to_the_back_and_idle_ones_leave_the_dirty_set() -> None:
    cache, _ = make()
    sid = cache.maybe_create(CONSUMER, False, [("a", part(0)), ("a", part(1)), ("b", part(0))])
    session = cache.get(sid)
    assert session is not None
    a0, a1, b0 = session.topics["a"][0], session.topics["a"][1], session.topics["b"][0]
    assert list(session.dirty) == [a0, a1, b0]  # a new session reads everything once
    session.settle([a1], [a0])
    assert list(session.dirty) == [b0, a0]
    assert (a0.key, b0.key) == ("a", "b")


def test_the_request_makes_what_it_names_dirty_and_forgetting_stops_the_watch() -> None:
    cache, _ = make()
    sid = create(cache, 3)
    session = cache.get(sid)
    assert session is not None
    t0, t1, t2 = (session.topics["t"][i] for i in range(3))
    replica = Watched()
    t2.watched = replica
    session.settle([t0, t1, t2], [])
    assert not session.dirty
    ctx = cache.new_context(sid, 1, False, [("t", part(1, 40)), ("u", part(0))], [("t", 2)])
    assert ctx.session is session
    u0 = session.topics["u"][0]
    assert list(session.dirty) == [t1, u0] and u0.key == "u" and t1.fetch_offset == 40
    assert replica.unwatched == [t2] and t2.watched is None


class Stable:
    """Stands in for a replica as an event's source: its last stable offset."""

    def __init__(self, last_stable_offset: int) -> None:
        self.last_stable_offset = last_stable_offset


class Watched:
    """Stands in for a replica: records what stopped watching it."""

    def __init__(self) -> None:
        self.unwatched: list[CachedPartition] = []

    def unwatch(self, entry: CachedPartition) -> None:
        self.unwatched.append(entry)


async def test_events_make_a_partition_dirty_and_wake_only_the_fetch_that_waits_for_them() -> None:
    loop = asyncio.get_running_loop()
    cache, _ = make()
    follower = cache.get(create(cache, 1, privileged=True))
    consumer = cache.get(create(cache, 1))
    assert follower is not None and consumer is not None
    f0, c0 = follower.topics["t"][0], consumer.topics["t"][0]
    follower.settle([f0], [])
    consumer.settle([c0], [])
    follower.waiter, follower.wakes_on = loop.create_future(), APPEND | REPLICA
    consumer.waiter, consumer.wakes_on = loop.create_future(), HIGH_WATERMARK | REPLICA
    follower.on_event(f0, HIGH_WATERMARK, Stable(5))  # the follower is told the new HW next time, but not woken
    assert list(follower.dirty) == [f0] and not follower.waiter.done()
    consumer.on_event(c0, APPEND, Stable(-1))  # a consumer reads to the high watermark: an append alone is nothing
    assert not consumer.dirty and not consumer.waiter.done()
    follower.on_event(f0, APPEND, Stable(-1))
    consumer.on_event(c0, HIGH_WATERMARK, Stable(5))
    assert follower.waiter.done() and consumer.waiter.done()
    # READ_COMMITTED: a high watermark move inside an open transaction (the LSO it was told stays) wakes nobody
    consumer.waiter, consumer.read_committed = loop.create_future(), True
    c0.last_stable_offset = 5
    consumer.on_event(c0, HIGH_WATERMARK, Stable(5))
    assert not consumer.waiter.done()
    consumer.on_event(c0, HIGH_WATERMARK, Stable(6))
    assert consumer.waiter.done()
    # nobody waits for an ISR change; a closed session answers its parked fetch and stops watching
    follower.waiter = loop.create_future()
    follower.on_event(f0, ISR, Stable(-1))
    assert not follower.waiter.done()
    replica = Watched()
    f0.watched = replica
    cache.remove(follower.id)
    assert follower.waiter.done() and replica.unwatched == [f0] and not follower.dirty


def test_no_slots_means_no_sessions() -> None:
    cache, _ = make(slots=0)
    assert create(cache, 5, privileged=True) == INVALID_SESSION_ID
    assert len(cache) == 0


def test_a_full_cache_evicts_a_stale_session_first() -> None:
    cache, clock = make(slots=2)
    old = create(cache, 100)
    clock.advance(1000)
    young = create(cache, 1)
    clock.advance(EVICTION_MS)
    cache.new_context(young, 1, False, [], [])  # used: only `old` is stale now
    clock.advance(1)
    new = create(cache, 1)
    assert new != INVALID_SESSION_ID
    assert cache.get(old) is None and cache.get(young) is not None and cache.evictions == 1


def test_a_young_consumer_session_is_kept_from_consumers_but_yields_to_a_follower() -> None:
    cache, _clock = make(slots=1)
    consumer = create(cache, 50)
    assert create(cache, 500) == INVALID_SESSION_ID  # younger than EVICTION_MS: no consumer may take its slot
    follower = create(cache, 1, privileged=True)
    assert follower != INVALID_SESSION_ID and cache.get(consumer) is None
    # a young follower session yields to nobody, not even a bigger follower
    assert create(cache, 5000, privileged=True) == INVALID_SESSION_ID
    assert cache.get(follower) is not None


def test_a_mature_session_yields_to_a_bigger_one_only() -> None:
    cache, clock = make(slots=2)
    small = create(cache, 10)
    big = create(cache, 1000)
    clock.advance(EVICTION_MS + 1)
    cache.new_context(small, 1, False, [], [])
    cache.new_context(big, 1, False, [], [])  # both in use, neither stale, both mature
    assert create(cache, 10) == INVALID_SESSION_ID  # not worth more than the smallest
    newcomer = create(cache, 11)
    assert newcomer != INVALID_SESSION_ID
    assert cache.get(small) is None and cache.get(big) is not None


def test_a_mature_follower_session_yields_to_a_bigger_follower_but_never_to_a_consumer() -> None:
    cache, clock = make(slots=1)
    follower = create(cache, 10, privileged=True)
    clock.advance(EVICTION_MS + 1)
    cache.new_context(follower, 1, False, [], [])
    assert create(cache, 10_000) == INVALID_SESSION_ID
    assert create(cache, 11, privileged=True) != INVALID_SESSION_ID
    assert cache.get(follower) is None


def test_sessions_of_topic_ids_are_keyed_by_id() -> None:
    cache, _ = make()
    tid = uuid.uuid4()
    sid = cache.maybe_create(CONSUMER, True, [(tid, part(0)), (tid, part(1))])
    ctx = cache.new_context(sid, 1, True, [], [(tid, 0)])
    assert ctx.session is not None and list(ctx.session.topics) == [tid] and ctx.session.size == 1
    assert len({cache.maybe_create(CONSUMER, False, [("t", part(0))]) for _ in range(5)}) == 5  # ids are unique
