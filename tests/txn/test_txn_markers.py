"""The marker sender's routing and retries, with a scripted marker writer and a manual clock: retriable answers go
again to whoever leads by then, deleted partitions are dropped, a fenced answer stops the transaction, and the
completion is reported once every partition is done."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable

from odradek.broker.metadata import BrokerEndpoint, MetadataCache, PartitionMeta, TopicMeta
from odradek.broker.txn.marker_writer import MarkerSpec
from odradek.broker.txn.markers import RETRY_BACKOFF_S, MarkerSender, PendingCompletion
from odradek.broker.txn.peers import PeerPool
from odradek.broker.txn.state import TxnMetadata, TxnState
from odradek.clock import ManualClock
from odradek.errors import ErrorCode as E
from odradek.placement.model import TopicPartition as TP

NOW = 1_700_000_000_000


class ScriptedWriter:
    """Answers each partition from a script (then NONE), recording every call."""

    def __init__(self, script: dict[TP, list[E]]) -> None:
        self.script = script
        self.calls: list[list[TP]] = []

    async def write(self, markers: Iterable[MarkerSpec], timeout_s: float) -> dict[int, dict[TP, E]]:
        out: dict[int, dict[TP, E]] = {}
        batch = []
        for spec in markers:
            for tp in spec.partitions:
                batch.append(tp)
                answers = self.script.get(tp, [])
                out.setdefault(spec.producer_id, {})[tp] = answers.pop(0) if answers else E.none
        self.calls.append(sorted(batch))
        return out


def metadata(leaders: dict[TP, int]) -> MetadataCache:
    cache = MetadataCache("c")
    cache.set_broker(BrokerEndpoint(0, "127.0.0.1", 1))
    by_topic: dict[str, dict[int, PartitionMeta]] = {}
    for tp, leader in leaders.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = PartitionMeta(tp.partition, leader, 0, [0], [0])
    for topic, parts in by_topic.items():
        cache.set_topic(TopicMeta(topic, uuid.uuid4(), parts))
    return cache


def pending_commit(partitions: set[TP], done: list[PendingCompletion]) -> PendingCompletion:
    meta = TxnMetadata("t", 7, 0, 60_000, TxnState.EMPTY, NOW)
    meta.complete(meta.prepare_add_partitions(frozenset(partitions), NOW))
    meta.complete(meta.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, NOW))
    return PendingCompletion("t", 3, 0, True, 7, 0, meta, meta.prepare_complete(NOW), done.append)


async def settle(until: object = None) -> None:
    for _ in range(100):
        await asyncio.sleep(0)
        if until is not None and until():  # type: ignore[operator]
            return
    if until is not None:
        raise AssertionError("did not settle")


def sender(cache: MetadataCache, writer: ScriptedWriter, clock: ManualClock) -> MarkerSender:
    return MarkerSender(0, cache, writer, PeerPool(cache, "test"), clock, 1.0)  # type: ignore[arg-type]


async def test_retriable_answers_are_sent_again_after_a_backoff() -> None:
    a0, a1 = TP("a", 0), TP("a", 1)
    clock = ManualClock()
    writer = ScriptedWriter({a0: [E.not_leader_or_follower, E.request_timed_out]})
    s = sender(metadata({a0: 0, a1: 0}), writer, clock)
    done: list[PendingCompletion] = []
    p = pending_commit({a0, a1}, done)
    s.add(p)
    await settle(lambda: writer.calls)
    assert writer.calls == [[a0, a1]] and p.metadata.partitions == {a0} and not done
    for expected_calls in (2, 3):
        await settle(clock.sleep_deadlines)  # the retry is parked on the clock
        clock.advance(int(RETRY_BACKOFF_S * 1000))
        await settle(lambda n=expected_calls: len(writer.calls) == n)  # type: ignore[misc]
    assert writer.calls[1:] == [[a0], [a0]]
    await settle(lambda: done)
    assert done == [p] and s.pending_count() == 0
    await s.close()


async def test_deleted_partitions_are_dropped_and_unknown_leaders_wait() -> None:
    a0, gone = TP("a", 0), TP("gone", 0)
    cache = metadata({a0: -1})
    writer = ScriptedWriter({})
    s = sender(cache, writer, ManualClock())
    done: list[PendingCompletion] = []
    p = pending_commit({a0, gone}, done)
    s.add(p)
    await settle()
    assert p.metadata.partitions == {a0} and writer.calls == []  # no leader yet: nothing sent
    s.tick()
    await settle()
    assert writer.calls == []
    cache.topics["a"].partitions[0].leader = 0
    s.tick()
    await settle(lambda: done)
    assert writer.calls == [[a0]] and done == [p]
    await s.close()


async def test_a_fenced_answer_stops_the_transaction() -> None:
    a0, a1 = TP("a", 0), TP("a", 1)
    writer = ScriptedWriter({a0: [E.transaction_coordinator_fenced]})
    s = sender(metadata({a0: 0, a1: 0}), writer, ManualClock())
    done: list[PendingCompletion] = []
    s.add(pending_commit({a0, a1}, done))
    await settle(lambda: writer.calls)
    await settle()
    assert s.pending_count() == 0 and not done
    await s.close()


async def test_losing_the_transaction_partition_forgets_its_markers() -> None:
    a0 = TP("a", 0)
    writer = ScriptedWriter({a0: [E.not_leader_or_follower]})
    clock = ManualClock()
    s = sender(metadata({a0: 0}), writer, clock)
    done: list[PendingCompletion] = []
    s.add(pending_commit({a0}, done))
    await settle(lambda: writer.calls)
    s.remove_for_partition(3)
    await settle(clock.sleep_deadlines)
    clock.advance(int(RETRY_BACKOFF_S * 1000))
    await settle()
    assert writer.calls == [[a0]] and not done
    await s.close()

