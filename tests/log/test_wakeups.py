"""Parked fetches and acks=all produces wake as soon as what they wait for is there (issue 11).

Each test parks a waiter the way the Fetch and Produce handlers do (a future registered on the partition, or
``wait_for_hw``), makes the awaited thing happen by a real append, follower fetch, ISR change or leadership change,
and checks the waiter is done after yielding to the event loop a bounded number of times: no wall-clock waits, no
timing assertions. The long timeouts given to ``wait_for_hw`` would make a missed wake-up fail the ``until``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_isr import answered, append, leader, until

from odradek.broker.log.partition_log import PartitionLog
from odradek.broker.replica import Partition
from odradek.broker.topic_config import LogConfig
from odradek.errors import KafkaError

LONG_S = 3600.0


def parked(part: Partition, *more: Partition, consumer: bool = False) -> asyncio.Future[None]:
    """A fetch request's single future, registered on every partition it reads (as apis/fetch.py does): a
    follower's waits for data, a consumer's for the high watermark."""
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for p in (part, *more):
        if consumer:
            p.add_visible_waiter(fut)
        else:
            p.add_data_waiter(fut)
    return fut


async def test_acks_all_completes_when_the_last_isr_follower_fetch_moves_the_hw_with_no_data_for_it(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2, 3])
    append(part, 3)
    ack = asyncio.ensure_future(part.wait_for_hw(3, LONG_S))
    await asyncio.sleep(0)
    part.record_follower_fetch(2, 3)
    await asyncio.sleep(0)
    assert not ack.done(), "one follower of two has not replicated: the HW stays"
    part.record_follower_fetch(3, 3)  # a fetch at the log end: its response carries no data
    await until(ack.done, "the acks=all waiter woke")
    assert ack.result() is True and part.high_watermark == 3


async def test_a_hw_already_reached_before_the_produce_waits_answers_at_once(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2])
    append(part, 2)
    part.record_follower_fetch(2, 2)
    assert await part.wait_for_hw(2, 0.0) is True  # a zero timeout: only an immediate answer passes


async def test_a_follower_outside_the_isr_wakes_on_an_append_that_moves_the_hw(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2], isr=[1])
    fetch = parked(part)
    append(part, 1)
    assert part.high_watermark == 1
    await until(fetch.done, "the catching-up follower's fetch woke")


async def test_a_parked_follower_fetch_wakes_on_an_append_that_does_not_move_the_hw(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2, 3])
    fetch = parked(part)
    append(part, 1)
    assert part.high_watermark == 0
    await until(fetch.done, "the follower fetch woke on new data")


async def test_a_parked_consumer_fetch_wakes_when_a_follower_fetch_alone_moves_the_hw(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2])
    append(part, 1)
    consumer = parked(part, consumer=True)
    append(part, 1)
    await asyncio.sleep(0)
    assert not consumer.done(), "an append the follower has not replicated shows the consumer nothing"
    part.record_follower_fetch(2, 2)  # a follower fetch with no data in its answer moves the HW
    await until(consumer.done, "the consumer fetch woke on the HW move")


async def test_one_partition_of_a_multi_partition_fetch_wakes_the_whole_request(open_log, clock, tmp_path: Path):
    first, _ = leader(open_log, clock, [1])
    other = Partition("other", 0, PartitionLog.open(tmp_path / "other-0", LogConfig(), clock), broker_id=1,
                      clock=clock)
    other.make_leader(leader_epoch=0, replicas=[1], isr=[1])
    fetch = parked(first, other, consumer=True)
    append(other, 1)  # RF 1: the append moves the HW at once
    await until(fetch.done, "the second partition's HW move woke the request")
    first.remove_visible_waiter(fetch)
    other.remove_visible_waiter(fetch)
    append(first, 1)  # the request's future is gone from both partitions: nothing left to wake twice


async def test_an_isr_shrink_moves_the_hw_and_completes_acks_all(open_log, clock):
    part, writer = leader(open_log, clock, [1, 2, 3])
    append(part, 2)
    part.record_follower_fetch(2, 2)
    ack = asyncio.ensure_future(part.wait_for_hw(2, LONG_S))
    await asyncio.sleep(0)
    clock.advance(20_000)
    part.record_follower_fetch(2, 2)
    part.maybe_shrink_isr(10_000)  # follower 3 never fetched: out
    await answered(writer, 1)
    await until(ack.done, "the shrink moved the HW and woke the produce")
    assert part.isr == [1, 2] and ack.result() is True


async def test_a_new_leader_epoch_wakes_fetches_parked_under_the_old_one(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2])
    fetch = parked(part)
    consumer = parked(part, consumer=True)
    part.make_leader(leader_epoch=1, replicas=[1, 2], isr=[1, 2])  # still the leader, a new epoch
    await until(lambda: fetch.done() and consumer.done(), "the fetches re-check their epoch")


async def test_losing_leadership_wakes_fetches_and_fails_produces(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2])
    append(part, 1)
    fetch = parked(part)
    consumer = parked(part, consumer=True)
    stable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    part.add_stable_waiter(stable, part.last_stable_offset)
    ack = asyncio.ensure_future(part.wait_for_hw(1, LONG_S))
    await asyncio.sleep(0)
    part.make_follower(leader_id=2, leader_epoch=1, replicas=[1, 2], isr=[1, 2])
    await until(lambda: fetch.done() and consumer.done() and stable.done() and ack.done(), "every waiter woke")
    assert isinstance(ack.exception(), KafkaError)


async def test_a_read_committed_fetch_registered_after_the_lso_moved_wakes_at_once(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2])
    seen = part.last_stable_offset
    append(part, 1)
    part.record_follower_fetch(2, 1)  # the LSO moves between the fetch's read and its registration
    stable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    part.add_stable_waiter(stable, seen)
    assert stable.done()


async def test_a_read_committed_fetch_wakes_when_the_lso_moves_not_on_an_append(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2])
    stable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    part.add_stable_waiter(stable, part.last_stable_offset)
    append(part, 1)
    await asyncio.sleep(0)
    assert not stable.done(), "an unreplicated append does not move the LSO"
    part.record_follower_fetch(2, 1)
    await until(stable.done, "the LSO move woke the read_committed fetch")


