"""The nemesis checker on hand-made histories: each rule finds what it should, and only under the contract that
forbids it (acks=1's losses are counted as allowed, acks=all's are anomalies)."""

from __future__ import annotations

from odradek.lab.batches import Batch
from odradek.lab.checker import (
    ACKS_ALL_IDEMPOTENT,
    ACKS_ONE,
    Ack,
    Assignment,
    Commit,
    FaultWindow,
    History,
    Read,
    Semantics,
    check,
    recoveries,
    unavailability,
)

T = "t"


def _history(semantics: Semantics = ACKS_ALL_IDEMPOTENT, partitions: int = 1) -> History:
    return History({T: semantics}, {T: partitions})


def _ack(offset: int, value: bytes, partition: int = 0, sent: float = 0.0, at: float = 0.0) -> Ack:
    return Ack(T, partition, offset, value, sent, at)


def test_a_clean_history_has_no_anomaly() -> None:
    h = _history()
    h.acks = [_ack(0, b"p:0"), _ack(1, b"p:1")]
    h.final = {(T, 0): [(0, b"p:0"), (1, b"p:1")]}
    h.reads = [Read("c", T, 0, 0, b"p:0")]
    report = check(h)
    assert report.anomalies() == []
    assert report.records_checked == 2
    assert report.topics[0].in_log == 2


def test_an_acknowledged_record_missing_from_the_log_is_lost() -> None:
    h = _history()
    h.acks = [_ack(0, b"p:0"), _ack(1, b"p:1")]
    h.final = {(T, 0): [(0, b"p:0")]}
    report = check(h)
    assert len(report.topics[0].lost) == 1
    assert any("lost" in a and "p:1" in a for a in report.anomalies())


def test_acks_one_losses_are_allowed_and_counted() -> None:
    h = _history(ACKS_ONE)
    h.acks = [_ack(0, b"p:0"), _ack(1, b"p:1")]
    h.final = {(T, 0): [(0, b"p:0")]}
    report = check(h)
    assert report.anomalies() == []
    assert report.topics[0].allowed() == [f"{T}: 1 acknowledged records lost, 0 moved (allowed by {ACKS_ONE.name})"]


def test_losses_are_attributed_to_the_fault_they_were_acknowledged_during() -> None:
    h = _history(ACKS_ONE)
    h.acks = [_ack(0, b"p:0", at=1.0), _ack(1, b"p:1", at=3.5), _ack(2, b"p:2", at=6.0), _ack(3, b"p:3", at=11.0),
              _ack(4, b"p:4", at=13.0)]
    h.final = {(T, 0): [(0, b"p:0")]}
    h.faults = [FaultWindow("cut", 4.0, 7.0)]  # p:1 just before it, p:3 just after its heal, p:4 long after
    assert check(h).topics[0].lost_during == {"cut": 3, "no fault": 1}
    # a loss within the trail of one fault but during the next belongs to the next (seed 11: a leader cut from
    # ZooKeeper right after a ZooKeeper leader was killed and healed)
    h.faults = [FaultWindow("zk-kill", 0.0, 3.0), FaultWindow("cut", 3.2, 7.0)]
    assert check(h).topics[0].lost_during == {"cut": 3, "no fault": 1}  # p:1 at 3.5 is in zk-kill's trail too


def test_a_record_found_at_another_offset_than_acknowledged_has_moved() -> None:
    h = _history()
    h.acks = [_ack(1, b"p:1")]
    h.final = {(T, 0): [(0, b"x:0"), (2, b"p:1")]}
    report = check(h)
    assert report.topics[0].moved and not report.topics[0].lost
    assert any("moved" in a for a in report.anomalies())


def test_duplicates_and_reordering_are_found_per_producer() -> None:
    h = _history()
    h.final = {(T, 0): [(0, b"p:0"), (1, b"q:5"), (2, b"p:3"), (3, b"p:1"), (4, b"q:6"), (5, b"p:2"),
                        (6, b"p:3")]}
    report = check(h).topics[0]
    assert len(report.duplicates) == 1 and "p:3" in report.duplicates[0]
    # p:1 and p:2 both come after p:3; the second p:3 is a duplicate, not also a reordering; q is in order
    assert [v.split(" at ")[0] for v in report.order_violations] == ["partition 0: b'p:1'", "partition 0: b'p:2'"]
    assert any("order violation" in a for a in check(h).anomalies())


def _one_record_batches(sessions: list[tuple[int, int, int]]) -> dict[int, Batch]:
    """offset n -> a one-record batch of (producer id, epoch, sequence) ``sessions[n]``."""
    return {o: Batch(pid, epoch, seq, o, o) for o, (pid, epoch, seq) in enumerate(sessions)}


def test_a_record_written_again_under_a_new_producer_session_is_allowed_and_counted() -> None:
    # the lab's open anomaly of issue 15: p:1..p:2 written, p:3 written, then p:1..p:2 again under a new producer
    # id (librdkafka re-sent them after OUT_OF_ORDER_SEQUENCE_NUMBER, confluentinc/librdkafka#4953)
    h = _history()
    h.acks = [_ack(0, b"p:1"), _ack(1, b"p:2"), _ack(2, b"p:3")]
    h.final = {(T, 0): [(0, b"p:1"), (1, b"p:2"), (2, b"p:3"), (3, b"p:1"), (4, b"p:2")]}
    h.batches = {(T, 0): _one_record_batches([(7, 0, 10), (7, 0, 11), (7, 0, 12), (8, 0, 0), (8, 0, 1)])}
    t = check(h).topics[0]
    assert check(h).anomalies() == []
    assert len(t.session_duplicates) == 2 and t.session_reorderings == 2
    assert "producer 7 epoch 0 sequence 10" in t.session_duplicates[0]
    assert "producer 8 epoch 0 sequence 0" in t.session_duplicates[0]
    assert any("new producer session" in a for a in t.allowed())
    # a bumped epoch of the same producer id is a new session too
    h.batches = {(T, 0): _one_record_batches([(7, 0, 10), (7, 0, 11), (7, 0, 12), (7, 1, 0), (7, 1, 1)])}
    assert check(h).anomalies() == []


def test_a_record_written_twice_in_one_producer_session_is_the_brokers_fault() -> None:
    h = _history()
    h.acks = [_ack(0, b"p:1"), _ack(1, b"p:2")]
    h.final = {(T, 0): [(0, b"p:1"), (1, b"p:2"), (2, b"p:1")]}
    h.batches = {(T, 0): _one_record_batches([(7, 0, 10), (7, 0, 11), (7, 0, 10)])}
    t = check(h).topics[0]
    assert len(t.duplicates) == 1 and not t.session_duplicates
    assert "producer 7 epoch 0 sequence 10" in t.duplicates[0]
    assert any("duplicate" in a for a in check(h).anomalies())
    assert any("order violation" in a for a in check(h).anomalies())
    # without the batch headers nothing can be excused
    h.batches = {}
    assert len(check(h).topics[0].duplicates) == 1


def test_a_read_record_that_vanished_is_an_anomaly_under_any_contract() -> None:
    h = _history(ACKS_ONE)
    h.acks = [_ack(0, b"p:0")]
    h.final = {(T, 0): [(0, b"p:9")]}
    h.reads = [Read("c1", T, 0, 0, b"p:0")]
    report = check(h)
    assert any("vanished" in a for a in report.anomalies())


def test_unacknowledged_reads_matter_only_under_read_committed() -> None:
    h = _history()
    h.final = {(T, 0): [(0, b"p:0")]}
    h.reads = [Read("c", T, 0, 0, b"p:0")]
    assert check(h).anomalies() == []
    h.semantics = {T: Semantics("transactional", True, True, True, read_committed=True)}
    assert any("never committed" in a for a in check(h).anomalies())


def test_a_consumer_starting_below_an_acknowledged_commit_is_an_offset_going_backwards() -> None:
    h = _history()
    h.commits = [Commit("c1", T, 0, 10, at=5.0), Commit("c1", T, 0, 20, at=6.0)]
    h.assignments = [Assignment("c2", T, 0, 20, at=7.0), Assignment("c3", T, 0, 12, at=8.0),
                     Assignment("c4", T, 0, 0, at=1.0)]  # before any commit: starting at 0 is right
    backwards = check(h).offsets_backwards
    assert len(backwards) == 1 and "c3" in backwards[0] and "12" in backwards[0]


def test_a_final_group_offset_below_an_acknowledged_commit_is_an_offset_going_backwards() -> None:
    h = _history()
    h.commits = [Commit("c1", T, 0, 20, at=6.0)]
    h.final_committed = {(T, 0): 15}
    assert any("final offset 15" in a for a in check(h).anomalies())
    h.final_committed = {(T, 0): 20}
    assert check(h).anomalies() == []


def test_unavailability_merges_gaps_across_partitions() -> None:
    acks = [_ack(0, b"", 0, at=t) for t in (0.0, 0.5, 3.0, 3.2)] + [_ack(0, b"", 1, at=t) for t in (0.1, 2.0, 4.5)]
    windows = unavailability(acks, 2, gap_s=1.0)
    assert [(w.start, w.end, w.partitions) for w in windows] == [(0.1, 4.5, (0, 1))]
    assert unavailability(acks, 2, gap_s=5.0) == []


def test_recovery_is_when_every_partition_acknowledged_a_record_sent_after_the_fault() -> None:
    acks = [_ack(0, b"", 0, sent=9.0, at=10.5),  # sent before the fault: does not count
            _ack(0, b"", 0, sent=10.2, at=11.0), _ack(0, b"", 1, sent=10.1, at=13.0)]
    r = recoveries(acks, 2, [FaultWindow("f", 10.0, 12.0), FaultWindow("g", 20.0, 21.0)])
    assert r[0].after_start_s == 3.0 and r[0].after_heal_s == 1.0
    assert r[1].after_start_s is None  # nothing sent after g was ever acknowledged
