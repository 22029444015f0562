"""The transaction coordinator against an in-memory ``__transaction_state`` and an injected clock: what it writes,
what it answers, what a newly elected coordinator does with what it reads back, timeouts and expiration."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator

from odradek.broker.txn.config import TxnConfig
from odradek.broker.txn.coordinator import TransactionCoordinator
from odradek.broker.txn.log_format import decode_key, decode_value
from odradek.broker.txn.markers import PendingCompletion
from odradek.broker.txn.state import TxnState
from odradek.clock import ManualClock
from odradek.errors import ErrorCode as E
from odradek.errors import KafkaError
from odradek.placement.model import TopicPartition as TP
from odradek.protocol.records import BatchHeader, Record, decode_batch, iter_batches, stamp

TID = "tx1"


class MemoryTxnLog:
    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = defaultdict(list)
        self.fail_with: E | None = None

    async def append(self, partition: int, batch: bytearray) -> None:
        assert len(list(iter_batches(batch))) == 1  # validates the batch as the real log would
        if self.fail_with is not None:
            raise KafkaError(self.fail_with)
        stamp(batch, 0, sum(1 for _ in self.batches[partition]), 0)
        self.batches[partition].append(bytes(batch))
        await asyncio.sleep(0)

    def read(self, partition: int) -> Iterator[tuple[BatchHeader, list[Record]]]:
        for raw in list(self.batches[partition]):
            yield decode_batch(raw)

    def states(self, partition: int) -> list[tuple[str, TxnState | None]]:
        out = []
        for _, records in self.read(partition):
            for r in records:
                assert r.key is not None
                out.append((decode_key(r.key), None if r.value is None else decode_value(r.value).state))
        return out


class RecordingMarkers:
    """Stands in for the marker sender: records what would be sent; ``finish`` acknowledges every marker."""

    def __init__(self) -> None:
        self.pending: list[PendingCompletion] = []

    def add(self, pending: PendingCompletion) -> None:
        self.pending.append(pending)

    def remove_for_partition(self, txn_partition: int) -> None:
        self.pending = [p for p in self.pending if p.txn_partition != txn_partition]

    def finish(self) -> None:
        done, self.pending = self.pending, []
        for p in done:
            for tp in list(p.metadata.partitions):
                p.metadata.remove_partition(tp)
            p.on_done(p)


class Harness:
    def __init__(self, log: MemoryTxnLog | None = None, clock: ManualClock | None = None,
                 config: TxnConfig | None = None) -> None:
        self.log = log or MemoryTxnLog()
        self.clock = clock or ManualClock()
        self.markers = RecordingMarkers()
        self.ids = iter(range(5000, 6000))

        async def next_id() -> int:
            return next(self.ids)

        self.coordinator = TransactionCoordinator(0, self.clock, self.log, config or TxnConfig(), next_id,
                                                  self.markers)
        self.partition = self.coordinator.partition_for(TID)

    async def load(self, epoch: int = 0) -> None:
        self.coordinator.load_partition(self.partition, epoch)
        await settle(lambda: self.partition in self.coordinator.owned_partitions())

    def meta(self) -> object:
        return self.coordinator.describe(TID)[1]


async def settle(done: object = None) -> None:
    for _ in range(200):
        await asyncio.sleep(0)
        if done is None or done():  # type: ignore[operator]
            return
    raise AssertionError("did not settle")


async def test_requests_before_loading_and_elsewhere() -> None:
    h = Harness()
    assert (await h.coordinator.init_producer_id(TID, 1000, None))[0] is E.not_coordinator
    h.coordinator.load_partition(h.partition, 0)
    assert (await h.coordinator.init_producer_id(TID, 1000, None))[0] is E.coordinator_load_in_progress
    await settle(lambda: h.partition in h.coordinator.owned_partitions())
    assert (await h.coordinator.init_producer_id(TID, 1000, None))[0] is E.none
    assert (await h.coordinator.init_producer_id(TID, 900_001, None))[0] is E.invalid_transaction_timeout
    assert (await h.coordinator.init_producer_id("", 1000, None))[0] is E.invalid_request


async def test_commit_writes_prepare_then_complete() -> None:
    h = Harness()
    await h.load()
    error, pid, epoch = await h.coordinator.init_producer_id(TID, 60_000, None)
    assert (error, pid, epoch) == (E.none, 5000, 0)
    assert await h.coordinator.end_txn(TID, pid, epoch, True) == (E.invalid_txn_state, -1, -1)
    assert await h.coordinator.add_partitions(TID, pid, epoch, [TP("a", 0), TP("a", 1)]) is E.none
    assert await h.coordinator.add_partitions(TID, pid + 1, epoch, [TP("a", 0)]) is E.invalid_producer_id_mapping
    assert await h.coordinator.end_txn(TID, pid, epoch, True) == (E.none, pid, epoch)
    [pending] = h.markers.pending
    assert pending.commit and pending.metadata.partitions == {TP("a", 0), TP("a", 1)}
    # a retry while markers are pending (the completion is in progress), whichever outcome it asks for
    assert (await h.coordinator.end_txn(TID, pid, epoch, True))[0] is E.concurrent_transactions
    assert (await h.coordinator.end_txn(TID, pid, epoch, False))[0] is E.concurrent_transactions
    assert (await h.coordinator.add_partitions(TID, pid, epoch, [TP("a", 0)])) is E.concurrent_transactions
    h.markers.finish()
    await settle(lambda: h.coordinator.describe(TID)[1].state is TxnState.COMPLETE_COMMIT)  # type: ignore
    assert h.log.states(h.partition) == [(TID, TxnState.EMPTY), (TID, TxnState.ONGOING),
                                         (TID, TxnState.PREPARE_COMMIT), (TID, TxnState.COMPLETE_COMMIT)]
    assert await h.coordinator.end_txn(TID, pid, epoch, True) == (E.none, pid, epoch)  # a retried commit
    assert (await h.coordinator.end_txn(TID, pid, epoch, False))[0] is E.invalid_txn_state


async def test_second_producer_fences_an_ongoing_transaction() -> None:
    h = Harness()
    await h.load()
    _, pid, epoch = await h.coordinator.init_producer_id(TID, 60_000, None)
    await h.coordinator.add_partitions(TID, pid, epoch, [TP("a", 0)])
    assert (await h.coordinator.init_producer_id(TID, 60_000, None))[0] is E.concurrent_transactions
    [pending] = h.markers.pending
    assert not pending.commit and pending.producer_epoch == 1  # aborted under the bumped epoch
    # the old producer is fenced everywhere now
    assert (await h.coordinator.end_txn(TID, pid, 0, True))[0] is E.producer_fenced
    assert h.coordinator.verify(TID, pid, 0, [TP("a", 0)]) == {TP("a", 0): E.producer_fenced}
    h.markers.finish()
    await settle(lambda: h.coordinator.describe(TID)[1].state is TxnState.COMPLETE_ABORT)  # type: ignore
    assert await h.coordinator.init_producer_id(TID, 60_000, None) == (E.none, pid, 2)
    # KIP-360: the fenced producer cannot recover; the current one can
    assert (await h.coordinator.init_producer_id(TID, 60_000, (pid, 0)))[0] is E.producer_fenced
    assert await h.coordinator.init_producer_id(TID, 60_000, (pid, 2)) == (E.none, pid, 3)


async def test_epoch_exhaustion_moves_to_a_new_producer_id() -> None:
    h = Harness()
    await h.load()
    _, pid, _ = await h.coordinator.init_producer_id(TID, 60_000, None)
    h.coordinator.describe(TID)[1].producer_epoch = 32766  # type: ignore[union-attr]
    assert await h.coordinator.init_producer_id(TID, 60_000, None) == (E.none, pid + 1, 0)


async def test_failed_append_leaves_state_unchanged() -> None:
    h = Harness()
    await h.load()
    _, pid, epoch = await h.coordinator.init_producer_id(TID, 60_000, None)
    h.log.fail_with = E.not_enough_replicas
    assert await h.coordinator.add_partitions(TID, pid, epoch, [TP("a", 0)]) is E.coordinator_not_available
    h.log.fail_with = E.not_leader_or_follower
    assert await h.coordinator.add_partitions(TID, pid, epoch, [TP("a", 0)]) is E.not_coordinator
    m = h.coordinator.describe(TID)[1]
    assert m is not None and m.state is TxnState.EMPTY and not m.partitions and not m.pending


async def test_new_coordinator_completes_a_prepared_commit() -> None:
    first = Harness()
    await first.load(epoch=3)
    _, pid, epoch = await first.coordinator.init_producer_id(TID, 60_000, None)
    await first.coordinator.add_partitions(TID, pid, epoch, [TP("a", 0)])
    await first.coordinator.end_txn(TID, pid, epoch, True)
    first.coordinator.unload_partition(first.partition)  # leadership moved before the markers were acked
    assert first.markers.pending == []
    second = Harness(log=first.log)
    await second.load(epoch=4)
    [pending] = second.markers.pending
    assert pending.commit and pending.coordinator_epoch == 4 and pending.metadata.partitions == {TP("a", 0)}
    second.markers.finish()
    await settle(lambda: second.coordinator.describe(TID)[1].state is TxnState.COMPLETE_COMMIT)  # type: ignore


async def test_timed_out_transaction_is_aborted_with_an_epoch_bump() -> None:
    clock = ManualClock()
    h = Harness(clock=clock, config=TxnConfig(abort_timed_out_interval_ms=100))
    await h.load()
    _, pid, epoch = await h.coordinator.init_producer_id(TID, 1000, None)
    await h.coordinator.add_partitions(TID, pid, epoch, [TP("a", 0)])
    await h.coordinator.tick()
    assert h.markers.pending == []
    clock.advance(1001)
    await h.coordinator.tick()
    await settle(lambda: h.markers.pending)
    [pending] = h.markers.pending
    assert not pending.commit and pending.producer_epoch == epoch + 1
    h.markers.finish()
    await settle(lambda: h.coordinator.describe(TID)[1].state is TxnState.COMPLETE_ABORT)  # type: ignore
    assert (await h.coordinator.add_partitions(TID, pid, epoch, [TP("a", 0)])) is E.producer_fenced


async def test_idle_ids_expire_with_a_tombstone() -> None:
    clock = ManualClock()
    h = Harness(clock=clock, config=TxnConfig(id_expiration_ms=5000, remove_expired_interval_ms=100))
    await h.load()
    await h.coordinator.init_producer_id(TID, 1000, None)
    await h.coordinator.tick()
    clock.advance(5000)
    await h.coordinator.tick()
    await settle(lambda: h.coordinator.describe(TID)[0] is E.transactional_id_not_found)
    assert h.log.states(h.partition)[-1] == (TID, None)
    # reloaded, the tombstone forgets it
    again = Harness(log=h.log)
    await again.load(epoch=1)
    assert again.coordinator.describe(TID)[0] is E.transactional_id_not_found


async def test_list_transactions_filters() -> None:
    h = Harness()
    for p in range(50):
        h.coordinator.load_partition(p, 0)
    await settle(lambda: len(h.coordinator.owned_partitions()) == 50)
    _, pid, epoch = await h.coordinator.init_producer_id("a", 60_000, None)
    await h.coordinator.init_producer_id("b", 60_000, None)
    await h.coordinator.add_partitions("a", pid, epoch, [TP("x", 0)])
    error, listed, unknown = h.coordinator.list_transactions(set(), {"Ongoing", "Bogus"})
    assert (error, [t.transactional_id for t in listed], unknown) == (E.none, ["a"], ["Bogus"])
    assert {t.transactional_id for t in h.coordinator.list_transactions(set(), set())[1]} == {"a", "b"}
    assert [t.transactional_id for t in h.coordinator.list_transactions({pid}, set())[1]] == ["a"]

