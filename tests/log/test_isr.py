"""ISR shrink and expand, the high watermark and min.insync.replicas, on a manual clock with a real log.

The ``isr_writer`` is a fake of the compare-and-set on the partition state znode: it records each proposed ISR and
answers with a new znode version, or None for a write that lost. Tests wait for the written ISR by yielding to the
event loop until the writer has answered, never on wall time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from logtest_helpers import T0

from odradek.broker.replica import Partition
from odradek.broker.topic_config import LogConfig
from odradek.clock import ManualClock
from odradek.coordination.store import ConnectionLossError, SessionExpiredError
from odradek.protocol.records import encode_batch, validate_produce

LAG_MAX_MS = 10_000
LEADER = 1


class FakeIsrWriter:
    """Records proposals; ``lose`` makes the compare-and-set fail; ``gate`` holds writes in flight until set."""

    def __init__(self) -> None:
        self.proposals: list[list[int]] = []
        self.answered = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.version = 0
        self.lose = False
        self.gate: asyncio.Event | None = None

    async def __call__(self, partition: Partition, isr: list[int]) -> int | None:
        self.proposals.append(list(isr))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.lose:
                return None
            self.version += 1
            return self.version
        finally:
            self.in_flight -= 1
            self.answered += 1


async def until(condition: Callable[[], bool], what: str) -> None:
    """Yield to the event loop until ``condition`` holds; a bounded number of turns, not a wall-clock wait."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def answered(writer: FakeIsrWriter, count: int) -> None:
    # The partition applies the writer's answer in the same step as the writer returns, so once the writer has
    # answered, the ISR (or its absence of change) is visible.
    await until(lambda: writer.answered >= count, f"{count} ISR writes answered")


def append(part: Partition, count: int) -> None:
    buf = encode_batch([(None, b"r", [])] * count, timestamp_ms=T0)
    part.append_as_leader(buf, validate_produce(buf), T0)


def leader(open_log, clock: ManualClock, replicas: list[int], isr: list[int] | None = None,
           config: LogConfig | None = None) -> tuple[Partition, FakeIsrWriter]:
    part = Partition("topic", 0, open_log(config), broker_id=LEADER, clock=clock)
    writer = FakeIsrWriter()
    part.isr_writer = writer
    part.make_leader(leader_epoch=0, replicas=replicas, isr=isr if isr is not None else replicas, zk_version=0)
    return part, writer


async def test_a_follower_that_stops_fetching_is_shrunk_once_its_lag_passes_the_max_and_not_before(open_log, clock):
    part, writer = leader(open_log, clock, [1, 2, 3])
    append(part, 5)
    part.record_follower_fetch(2, 5)
    part.record_follower_fetch(3, 5)
    append(part, 5)  # follower 3 never fetches again; follower 2 keeps up
    for _ in range(10):
        clock.advance(LAG_MAX_MS // 10)
        part.record_follower_fetch(2, 10)
        part.maybe_shrink_isr(LAG_MAX_MS)
    await asyncio.sleep(0)
    assert writer.proposals == [], "exactly replica.lag.time.max.ms behind is not yet out of sync"
    assert part.isr == [1, 2, 3]

    clock.advance(1)
    part.maybe_shrink_isr(LAG_MAX_MS)
    await answered(writer, 1)
    assert writer.proposals == [[1, 2]]
    assert (part.isr, part.zk_version) == ([1, 2], 1)


async def test_followers_at_the_log_end_stay_in_the_isr_however_long_they_are_idle(open_log, clock):
    part, writer = leader(open_log, clock, [1, 2, 3])
    append(part, 5)
    part.record_follower_fetch(2, 5)
    part.record_follower_fetch(3, 5)
    clock.advance(100 * LAG_MAX_MS)  # no produce and no fetches meanwhile
    part.maybe_shrink_isr(LAG_MAX_MS)
    await asyncio.sleep(0)
    assert writer.proposals == [] and part.isr == [1, 2, 3]


async def test_a_follower_always_one_fetch_behind_a_busy_leader_stays_in_the_isr(open_log, clock):
    """Under steady produce each fetch asks for what the leader had at the previous fetch, never its current end.
    Kafka counts such a follower as caught up as of its previous fetch; only lag over the maximum shrinks it."""
    part, writer = leader(open_log, clock, [1, 2])
    fetched_to = 0
    previous_fetch_ms = last_fetch_ms = clock.monotonic_ms()
    for _ in range(30):
        append(part, 3)
        part.record_follower_fetch(2, fetched_to)
        previous_fetch_ms, last_fetch_ms = last_fetch_ms, clock.monotonic_ms()
        fetched_to = part.log.log_end_offset  # what this fetch returns, and so where the next one starts
        clock.advance(LAG_MAX_MS // 4)
        part.maybe_shrink_isr(LAG_MAX_MS)
    await asyncio.sleep(0)
    assert writer.proposals == [] and part.isr == [1, 2]
    assert part.high_watermark == fetched_to - 3  # as far as the follower has confirmed

    # It stops fetching. Its last fetch asked for the leader's end as of the fetch before, so that earlier
    # fetch is the last time it is known to have been caught up, and the lag counts from there.
    clock.advance(previous_fetch_ms + LAG_MAX_MS - clock.monotonic_ms())
    part.maybe_shrink_isr(LAG_MAX_MS)
    await asyncio.sleep(0)
    assert writer.proposals == []
    clock.advance(1)
    part.maybe_shrink_isr(LAG_MAX_MS)
    await answered(writer, 1)
    assert part.isr == [1]


async def test_a_follower_is_added_back_once_it_reaches_the_high_watermark_and_the_epoch_start(open_log, clock):
    part, writer = leader(open_log, clock, [1, 2, 3], isr=[1, 2])
    append(part, 10)
    part.record_follower_fetch(2, 6)
    assert part.high_watermark == 6
    part.make_leader(leader_epoch=1, replicas=[1, 2, 3], isr=[1, 2], zk_version=part.zk_version)
    assert part.epoch_start_offset == 10

    part.record_follower_fetch(3, 5)  # below the high watermark
    part.record_follower_fetch(3, 8)  # at and past it, but short of the epoch's start offset
    await asyncio.sleep(0)
    assert writer.proposals == [] and part.isr == [1, 2]

    part.record_follower_fetch(3, 10)
    await answered(writer, 1)
    assert writer.proposals == [[1, 2, 3]]
    assert (part.isr, part.zk_version) == ([1, 2, 3], 1)
    assert part.high_watermark == 6, "follower 2 still holds the high watermark where it was"

    part.record_follower_fetch(4, 10)  # not a replica of this partition: never joins
    await asyncio.sleep(0)
    assert writer.proposals == [[1, 2, 3]]


async def test_the_high_watermark_follows_the_isr_minimum_and_never_moves_back(open_log, clock):
    part, writer = leader(open_log, clock, [1, 2, 3])
    append(part, 10)
    assert part.high_watermark == 0
    part.record_follower_fetch(2, 10)
    part.record_follower_fetch(3, 4)
    assert part.high_watermark == 4
    part.record_follower_fetch(3, 7)
    assert part.high_watermark == 7
    part.record_follower_fetch(3, 5)  # a follower that truncated reports less than before
    assert part.high_watermark == 7

    clock.advance(LAG_MAX_MS + 1)  # follower 3 has not been at the log end since the start
    part.record_follower_fetch(2, 10)
    part.maybe_shrink_isr(LAG_MAX_MS)
    await answered(writer, 1)
    assert part.isr == [1, 2]
    assert part.high_watermark == 10, "without the laggard the ISR's minimum is the log end"


async def test_the_high_watermark_waits_while_the_isr_is_below_min_insync_replicas(open_log, clock):
    config = LogConfig(min_insync_replicas=2)
    part, writer = leader(open_log, clock, [1, 2], config=config)
    append(part, 4)
    part.record_follower_fetch(2, 4)
    assert part.high_watermark == 4
    append(part, 4)
    clock.advance(LAG_MAX_MS + 1)
    part.maybe_shrink_isr(LAG_MAX_MS)
    await answered(writer, 1)
    assert part.isr == [1]
    append(part, 4)
    assert part.high_watermark == 4, "one replica in sync is fewer than min.insync.replicas"

    part.record_follower_fetch(2, 12)
    await answered(writer, 2)
    assert writer.proposals == [[1], [1, 2]]
    assert part.high_watermark == 12


async def test_min_insync_replicas_above_the_replication_factor_counts_as_the_replication_factor(open_log, clock):
    part, _ = leader(open_log, clock, [1], config=LogConfig(min_insync_replicas=3))
    append(part, 5)
    assert part.high_watermark == 5


async def test_a_lost_compare_and_set_leaves_the_isr_unchanged_and_a_later_write_can_win(open_log, clock):
    part, writer = leader(open_log, clock, [1, 2, 3])
    append(part, 5)
    writer.lose = True
    clock.advance(LAG_MAX_MS + 1)
    part.maybe_shrink_isr(LAG_MAX_MS)
    await answered(writer, 1)
    assert writer.proposals == [[1]]
    assert (part.isr, part.zk_version) == ([1, 2, 3], 0)
    assert part.high_watermark == 0

    writer.lose = False
    part.maybe_shrink_isr(LAG_MAX_MS)
    await answered(writer, 2)
    assert (part.isr, part.zk_version) == ([1], 1)
    assert part.high_watermark == 5


async def test_a_failing_writer_counts_as_a_lost_write(open_log, clock):
    part, _ = leader(open_log, clock, [1, 2])
    calls: list[list[int]] = []

    async def broken(partition: Partition, isr: list[int]) -> int | None:
        calls.append(isr)
        raise ConnectionError("coordination service unreachable")

    part.isr_writer = broken
    append(part, 5)
    clock.advance(LAG_MAX_MS + 1)
    part.maybe_shrink_isr(LAG_MAX_MS)
    await until(lambda: len(calls) == 1, "the write attempted")
    await asyncio.sleep(0)
    assert part.isr == [1, 2]
    part.maybe_shrink_isr(LAG_MAX_MS)  # the failed write no longer counts as in flight
    await until(lambda: len(calls) == 2, "a retry")


async def test_a_zookeeper_connection_loss_is_one_warning_line_and_an_unexpected_error_keeps_its_traceback(
        open_log, clock, caplog):
    caplog.set_level("WARNING", logger="odradek.broker.replica")
    part, _ = leader(open_log, clock, [1, 2])
    errors: list[Exception] = [ConnectionLossError(None, "/brokers/topics/t/partitions/0/state"),
                               SessionExpiredError(None), RuntimeError("a bug")]

    async def failing(partition: Partition, isr: list[int]) -> int | None:
        raise errors.pop(0)

    part.isr_writer = failing
    append(part, 5)
    clock.advance(LAG_MAX_MS + 1)
    for left in (2, 1, 0):
        part.maybe_shrink_isr(LAG_MAX_MS)
        await until(lambda left=left: len(errors) == left and not part._isr_change_pending, "the write failed")
    assert part.isr == [1, 2]
    lines = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records]
    assert lines == [
        ("WARNING", "writing ISR [1] for topic-0 failed: ConnectionLossError", False),
        ("WARNING", "writing ISR [1] for topic-0 failed: SessionExpiredError", False),
        ("ERROR", "writing ISR [1] for topic-0 failed", True),
    ]


async def test_no_second_isr_write_starts_while_one_is_in_flight(open_log, clock):
    part, writer = leader(open_log, clock, [1, 2, 3])
    writer.gate = asyncio.Event()
    append(part, 5)
    part.record_follower_fetch(2, 5)
    clock.advance(LAG_MAX_MS + 1)
    part.maybe_shrink_isr(LAG_MAX_MS)  # follower 3 goes
    await until(lambda: writer.in_flight == 1, "the first write in flight")

    append(part, 5)
    clock.advance(LAG_MAX_MS + 1)
    part.maybe_shrink_isr(LAG_MAX_MS)  # follower 2 lags too, but a write is still out
    await asyncio.sleep(0)
    assert writer.proposals == [[1, 2]]

    writer.gate.set()
    await answered(writer, 1)
    assert part.isr == [1, 2]
    part.maybe_shrink_isr(LAG_MAX_MS)
    await answered(writer, 2)
    assert writer.proposals == [[1, 2], [1]]
    assert writer.max_in_flight == 1
    assert part.isr == [1]


async def test_a_write_answered_after_leadership_moved_on_is_not_applied(open_log, clock):
    part, writer = leader(open_log, clock, [1, 2, 3])
    writer.gate = asyncio.Event()
    append(part, 5)
    clock.advance(LAG_MAX_MS + 1)
    part.maybe_shrink_isr(LAG_MAX_MS)
    await until(lambda: writer.in_flight == 1, "the write in flight")
    part.make_follower(leader_id=2, leader_epoch=1, replicas=[1, 2, 3], isr=[2, 3])
    writer.gate.set()
    await answered(writer, 1)
    assert part.isr == [2, 3] and part.zk_version == 0

