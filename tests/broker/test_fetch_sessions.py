"""The fetch session cache's decisions (KIP-227), driven by a manual clock: no broker, no socket."""

from __future__ import annotations

import random
import uuid

from odradek.broker.fetch_sessions import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    MAX_EPOCH,
    CachedPartition,
    ContextKind,
    FetchSessionCache,
    next_epoch,
)
from odradek.clock import ManualClock
from odradek.errors import ErrorCode


def part(index: int, offset: int = 0, hw: int = -1) -> CachedPartition:
    p = CachedPartition(index, offset, 0, 1 << 20, 0)
    p.high_watermark = hw
    return p


def make(slots: int = 10) -> tuple[FetchSessionCache, ManualClock]:
    clock = ManualClock()
    return FetchSessionCache(slots, clock, rng=random.Random(7)), clock


def create(cache: FetchSessionCache, n: int, privileged: bool = False, topic: str = "t") -> int:
    return cache.maybe_create(privileged, False, [(topic, part(i)) for i in range(n)])


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
    sid = cache.maybe_create(True, False, [("a", part(0, 5, hw=9)), ("a", part(1, 7, hw=9))])
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


def test_partitions_served_records_move_to_the_back() -> None:
    cache, _ = make()
    sid = cache.maybe_create(False, False, [("a", part(0)), ("a", part(1)), ("b", part(0))])
    session = cache.get(sid)
    assert session is not None
    session.rotate([("a", 0)])
    assert [(k, list(v)) for k, v in session.topics.items()] == [("b", [0]), ("a", [1, 0])]


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
    sid = cache.maybe_create(False, True, [(tid, part(0)), (tid, part(1))])
    ctx = cache.new_context(sid, 1, True, [], [(tid, 0)])
    assert ctx.session is not None and list(ctx.session.topics) == [tid] and ctx.session.size == 1
    assert len({cache.maybe_create(False, False, [("t", part(0))]) for _ in range(5)}) == 5  # ids are unique
