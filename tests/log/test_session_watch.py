"""Fetch sessions watch their partitions: every event that could change what a fetch of the session would answer
marks the partition dirty, and wakes the session's parked fetch when it is what that fetch waits for (issue 11).

An incremental fetch reads only the session's dirty partitions, so an event that fails to reach the session would
leave a follower or consumer without data it should get. Each test registers a session entry on a real
:class:`Partition` over a real log, parks the session's fetch (its ``waiter``), makes one event happen the way the
broker makes it (an append, a follower fetch moving the high watermark, a leadership change, DeleteRecords on a
worker thread, a disk error, an ISR write), and checks the dirty set and the waiter after yielding to the event
loop a bounded number of times: no wall-clock waits, no timing assertions.
"""

from __future__ import annotations

import asyncio

import pytest
from test_disk_errors import _fail_writes
from test_isr import answered, append, leader, until

from odradek.broker.fetch_sessions import (
    APPEND,
    HIGH_WATERMARK,
    REPLICA,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    ParkedFollowerFetches,
    stop_watching,
)
from odradek.broker.replica import Partition
from odradek.broker.topic_config import LogConfig
from odradek.clock import ManualClock
from odradek.errors import KafkaError

FOLLOWER = 2
LAG_MS = 30_000


def watching(part: Partition, clock: ManualClock, replica_id: int) -> tuple[FetchSession, CachedPartition]:
    """A session holding ``part`` with nothing left to read (as after an idle fetch), its fetch parked."""
    cache = FetchSessionCache(10, clock)
    entry = CachedPartition(part.index, part.log.log_end_offset, -1, 1 << 20, part.leader_epoch)
    session = cache.get(cache.maybe_create(replica_id, False, [(part.topic, entry)]))
    assert session is not None
    part.watch(entry, session)
    session.settle([entry], [])
    session.waiter = asyncio.get_running_loop().create_future()
    session.wakes_on = (APPEND if replica_id >= 0 else HIGH_WATERMARK) | REPLICA
    return session, entry


async def test_an_append_wakes_a_follower_session_and_dirties_a_consumer_one_only_when_the_hw_moves(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2, 3])
    follower, f_entry = watching(part, clock, FOLLOWER)
    consumer, c_entry = watching(part, clock, -1)
    append(part, 2)
    await until(follower.waiter.done, "the follower session's fetch woke on the append")
    assert f_entry in follower.dirty
    assert not consumer.dirty and not consumer.waiter.done(), "no HW move, nothing for a consumer"
    part.record_follower_fetch(2, 2)
    part.record_follower_fetch(3, 2)
    assert part.high_watermark == 2
    await until(consumer.waiter.done, "the consumer session's fetch woke on the HW move")
    assert c_entry in consumer.dirty


async def test_a_new_leader_epoch_and_the_loss_of_leadership_wake_every_session(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2, 3])
    follower, _f = watching(part, clock, FOLLOWER)
    consumer, _c = watching(part, clock, -1)
    part.make_leader(leader_epoch=1, replicas=[1, 2, 3], isr=[1, 2, 3], zk_version=1)
    await until(lambda: follower.waiter.done() and consumer.waiter.done(), "both woke on the new epoch")
    follower, _f = watching(part, clock, FOLLOWER)
    part.make_follower(leader_id=2, leader_epoch=2, replicas=[1, 2, 3], isr=[1, 2, 3])
    await until(follower.waiter.done, "the session woke on the loss of leadership")
    assert follower.dirty


async def test_the_same_epoch_again_resets_the_followers_so_their_partitions_are_read(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2, 3])
    follower, entry = watching(part, clock, FOLLOWER)
    part.make_leader(leader_epoch=0, replicas=[1, 2, 3], isr=[1, 2, 3], zk_version=3)
    assert entry in follower.dirty


async def test_delete_records_on_a_worker_thread_reaches_the_session_on_the_loop(open_log, clock):
    part, _ = leader(open_log, clock, [1])
    append(part, 4)
    consumer, entry = watching(part, clock, -1)
    await asyncio.to_thread(part.log.delete_records_before, 2, 4)
    await until(consumer.waiter.done, "the consumer session woke on the log start moving")
    assert entry in consumer.dirty


async def test_a_disk_error_dirties_and_wakes_the_sessions(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2])
    follower, entry = watching(part, clock, FOLLOWER)
    _fail_writes(part.log)
    with pytest.raises(KafkaError):
        append(part, 1)
    assert part.log.offline
    await until(follower.waiter.done, "the session woke on the log going offline")
    assert entry in follower.dirty


async def test_an_isr_change_dirties_the_sessions_without_waking_them(open_log, clock):
    # min.insync.replicas 3: the shrink holds the high watermark, so the ISR change is the only event
    part, writer = leader(open_log, clock, [1, 2, 3], config=LogConfig(min_insync_replicas=3))
    follower, entry = watching(part, clock, FOLLOWER)
    append(part, 1)
    part.record_follower_fetch(2, 1)
    follower.dirty.clear()
    follower.waiter = asyncio.get_running_loop().create_future()
    clock.advance(LAG_MS + 1)
    part.maybe_shrink_isr(LAG_MS)
    await answered(writer, 1)
    assert part.isr == [1, 2] and part.high_watermark == 0
    assert entry in follower.dirty and not follower.waiter.done()


async def test_a_follower_idle_on_a_partition_stays_caught_up_through_its_session_fetches(open_log, clock):
    """Its fetches no longer visit an idle partition, so the session's fetch times stand for them: the follower
    whose session fetched recently is in sync when the next append comes, one whose session stopped is not."""
    part, writer = leader(open_log, clock, [1, 2, 3])
    append(part, 1)
    part.record_follower_fetch(2, 1)
    part.record_follower_fetch(3, 1)
    live, _ = watching(part, clock, 2)
    watching(part, clock, 3)  # replica 3's session fetches no more
    clock.advance(LAG_MS * 3)
    live.last_used_ms = clock.monotonic_ms()  # replica 2 keeps fetching; the partition stays idle
    append(part, 1)
    part.maybe_shrink_isr(LAG_MS)
    await answered(writer, 1)
    assert part.isr == [1, 2]



async def test_an_append_answers_the_parked_fetch_of_a_follower_whose_session_does_not_watch_the_partition(
        open_log, clock):
    """Follower 2's session watches the partition, follower 3's does not (its fetch was parked before the partition
    reached its fetcher): the append answers 3's parked fetch and leaves 2's to its watch."""
    part, _ = leader(open_log, clock, [1, 2, 3])
    parked = ParkedFollowerFetches()
    part.parked = parked
    watching_session, _entry = watching(part, clock, 2)
    unaware = parked.park(3, asyncio.get_running_loop().create_future())
    aware = parked.park(2, watching_session.waiter)
    append(part, 1)
    assert unaware.answer_now and unaware.woken.done()
    assert not aware.answer_now, "a follower watching the partition is woken through its session, not answered"
    assert watching_session.waiter.done()
    parked.unpark(3, unaware)
    later = parked.park(3, asyncio.get_running_loop().create_future())
    entry = CachedPartition(part.index, part.log.log_end_offset, -1, 1 << 20, part.leader_epoch)
    part.watch(entry, FetchSession(1, 3, False, 0, 0))
    append(part, 1)
    assert not later.answer_now, "once follower 3 watches the partition, an append no longer answers its fetch"
    stop_watching(entry)
    append(part, 1)
    assert later.answer_now, "and it is answered again when it stops watching"
