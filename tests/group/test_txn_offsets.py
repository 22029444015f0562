"""Offsets committed inside a transaction (TxnOffsetCommit): pending until the marker, Kafka's precedence against
plain commits, KIP-447 member checks, and the loader's handling of transactional and control batches.

Driven against the coordinator with an in-memory ``__consumer_offsets`` (tests/group/memlog.py); the markers are
built as Kafka writes them (a transactional control batch whose record key is the control type).
"""

from __future__ import annotations

import struct

import crc32c

from odradek.broker.group import OffsetCommit
from odradek.broker.group.schema import OffsetValue
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition
from odradek.protocol.records import decode_batch, encode_batch

from .memlog import MemoryOffsetsLog
from .test_coordinator import Harness

E = ErrorCode
TP = TopicPartition("t", 0)
PID, EPOCH = 4000, 3


def marker(producer_id: int, commit: bool) -> bytearray:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 7)
    batch = encode_batch([(key, value, ())], timestamp_ms=0, producer_id=producer_id, producer_epoch=EPOCH,
                         control=True)
    # Transactional as well as control, as Kafka's end-transaction markers are.
    attributes = struct.unpack_from(">h", batch, 21)[0] | 0x10
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return batch


async def txn_commit(h: Harness, offset: int, *, producer_id: int = PID, group: str = "g", **member: object
                     ) -> ErrorCode:
    result = await h.coord.commit_txn_offsets(
        group,
        producer_id,
        EPOCH,
        str(member.get("member_id", "")),
        member.get("instance"),  # type: ignore[arg-type]
        int(member.get("generation", -1)),  # type: ignore[call-overload]
        {TP: OffsetCommit(offset, 2, "txn")},
    )
    return result[TP]


async def write_marker(h: Harness, producer_id: int, commit: bool) -> None:
    """What WriteTxnMarkers does for a ``__consumer_offsets`` partition: the marker, then the completion."""
    await h.log.append(0, marker(producer_id, commit))
    await h.coord.complete_transaction(0, producer_id, commit)


def visible(h: Harness, group: str = "g") -> int | None:
    value = h.coord.fetch_offsets(group, [TP])[1][TP]
    return None if value is None else value.offset


async def test_offsets_stay_pending_until_commit_marker(h: Harness) -> None:
    assert await txn_commit(h, 10) is E.none
    # In the log as the producer's transactional batch, invisible to OffsetFetch, unstable under require_stable.
    header, _ = decode_batch(h.log.batches[0][-1])
    assert header.is_transactional and (header.producer_id, header.producer_epoch) == (PID, EPOCH)
    assert header.base_sequence == -1
    assert visible(h) is None
    assert h.coord.unstable_offsets("g", [TP, TopicPartition("t", 1)]) == {TP}
    await write_marker(h, PID, commit=True)
    assert visible(h) == 10
    assert h.coord.unstable_offsets("g", [TP]) == set()


async def test_abort_drops_the_pending_offsets(h: Harness) -> None:
    await h.coord.commit_offsets("g", "", None, -1, {TP: OffsetCommit(5)})
    assert await txn_commit(h, 10) is E.none
    await write_marker(h, PID, commit=False)
    assert visible(h) == 5 and h.coord.unstable_offsets("g", [TP]) == set()
    # A marker for a producer with nothing pending here (its transaction touched other groups) changes nothing.
    await write_marker(h, 999, commit=True)
    assert visible(h) == 5


async def test_a_later_plain_commit_wins_over_an_earlier_transactional_one(h: Harness) -> None:
    assert await txn_commit(h, 10) is E.none
    await h.coord.commit_offsets("g", "", None, -1, {TP: OffsetCommit(20)})
    assert visible(h) == 20
    await write_marker(h, PID, commit=True)
    assert visible(h) == 20  # the transaction's record is older in the log: Kafka's olderThan keeps 20


async def test_a_transaction_appended_after_a_plain_commit_replaces_it(h: Harness) -> None:
    await h.coord.commit_offsets("g", "", None, -1, {TP: OffsetCommit(20)})
    assert await txn_commit(h, 30) is E.none
    assert visible(h) == 20
    await write_marker(h, PID, commit=True)
    assert visible(h) == 30


async def test_two_producers_complete_independently(h: Harness) -> None:
    assert await txn_commit(h, 10, producer_id=1) is E.none
    assert await txn_commit(h, 11, producer_id=2) is E.none
    await write_marker(h, 2, commit=True)
    assert visible(h) == 11
    assert h.coord.unstable_offsets("g", [TP]) == {TP}  # producer 1 still open
    await write_marker(h, 1, commit=True)
    assert visible(h) == 11  # producer 1's record is older than producer 2's


async def test_kip_447_member_fields_are_checked(h: Harness) -> None:
    results = await h.stable_group(1)
    member = results[0]
    assert await txn_commit(h, 1, member_id="ghost", generation=1) is E.unknown_member_id
    assert await txn_commit(h, 1, member_id=member.member_id, generation=7) is E.illegal_generation
    assert await txn_commit(h, 1, member_id=member.member_id, generation=1) is E.none
    # Without member fields (v0-v2 clients) a non-empty group still accepts the transaction's offsets.
    assert await txn_commit(h, 2) is E.none
    assert await txn_commit(h, 1, group="") is E.invalid_group_id


async def test_failed_append_leaves_nothing_pending(h: Harness) -> None:
    h.log.fail_with = E.not_leader_or_follower
    assert await txn_commit(h, 10) is E.not_coordinator
    h.log.fail_with = None
    assert h.coord.unstable_offsets("g", [TP]) == set()
    await write_marker(h, PID, commit=True)
    assert visible(h) is None


async def test_loader_replays_transactions_and_markers() -> None:
    h = Harness()
    await h.load()
    await h.coord.commit_offsets("committed", "", None, -1, {TP: OffsetCommit(1)})
    await h.coord.commit_offsets("aborted", "", None, -1, {TP: OffsetCommit(1)})
    await h.coord.commit_offsets("superseded", "", None, -1, {TP: OffsetCommit(1)})
    assert await txn_commit(h, 10, producer_id=1, group="committed") is E.none
    assert await txn_commit(h, 10, producer_id=2, group="aborted") is E.none
    assert await txn_commit(h, 10, producer_id=3, group="superseded") is E.none
    assert await txn_commit(h, 10, producer_id=4, group="open") is E.none
    await h.coord.commit_offsets("superseded", "", None, -1, {TP: OffsetCommit(50)})
    await write_marker(h, 1, commit=True)
    await write_marker(h, 2, commit=False)
    await write_marker(h, 3, commit=True)

    h2 = Harness(log=h.log, clock=h.clock)
    await h2.load()
    assert visible(h2, "committed") == 10
    assert visible(h2, "aborted") == 1
    assert visible(h2, "superseded") == 50
    assert visible(h2, "open") is None
    assert h2.coord.unstable_offsets("open", [TP]) == {TP}
    # The open transaction completes on the new coordinator.
    await write_marker(h2, 4, commit=True)
    assert visible(h2, "open") == 10
    assert h2.coord.fetch_offsets("committed", [TP])[1][TP] == OffsetValue(10, 2, "txn", h.clock.now_ms())


async def test_completion_while_loading_is_applied_after_the_load() -> None:
    h = Harness()
    await h.load()
    assert await txn_commit(h, 10) is E.none

    h2 = Harness(log=h.log, clock=h.clock)
    loading = h2.coord.load_partition(0)
    assert h2.coord.is_loading(0)
    # The marker's completion arrives while the partition is being loaded (past where the reader stops).
    await h2.coord.complete_transaction(0, PID, True)
    await loading
    assert visible(h2) == 10


async def test_loader_ignores_a_marker_without_pending_offsets() -> None:
    log = MemoryOffsetsLog()
    await log.append(0, marker(77, commit=True))
    h = Harness(log=log)
    await h.load()
    assert h.coord.fetch_offsets("g", None) == (E.none, {})


async def test_unloading_forgets_pending_offsets_and_reloading_restores_them() -> None:
    h = Harness()
    await h.load()
    assert await txn_commit(h, 10) is E.none
    h.coord.unload_partition(0)
    assert h.coord._offsets.producer_groups == {}
    await h.coord.complete_transaction(0, PID, True)  # not coordinating: nothing to do here
    await h.load()
    assert visible(h) is None and h.coord.unstable_offsets("g", [TP]) == {TP}
    await write_marker(h, PID, commit=True)
    assert visible(h) == 10

