"""The pure parts of the transaction coordinator: Kafka's state transitions, the answers decided from metadata, the
``__transaction_state`` record formats byte for byte, and the id-to-partition mapping."""

from __future__ import annotations

import struct

import pytest

from odradek.broker.txn import decisions
from odradek.broker.txn.coordinator import partition_for
from odradek.broker.txn.decisions import InitAction
from odradek.broker.txn.log_format import TxnLogError, decode_key, decode_value, encode_key, encode_value
from odradek.broker.txn.state import VALID_PREVIOUS, IllegalTransition, TxnMetadata, TxnState, TxnTransit
from odradek.errors import ErrorCode as E
from odradek.placement.model import TopicPartition as TP

NOW = 1_700_000_000_000


def meta(state: TxnState = TxnState.EMPTY, epoch: int = 0, partitions: set[TP] | None = None) -> TxnMetadata:
    m = TxnMetadata("t", 1000, epoch, 60_000, state, NOW, partitions=set(partitions or ()))
    if state is not TxnState.EMPTY:
        m.txn_start_timestamp = NOW
    return m


def ongoing(*tps: TP, epoch: int = 0) -> TxnMetadata:
    m = meta()
    m.producer_epoch = epoch
    m.complete(m.prepare_add_partitions(frozenset(tps), NOW))
    return m


# --- states and transitions --------------------------------------------------------------------------------------


def test_state_ids_and_names_are_kafkas() -> None:
    assert [(s.value, s.kafka_name) for s in TxnState] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence"),
    ]
    assert TxnState.from_name("Ongoing") is TxnState.ONGOING and TxnState.from_name("ongoing") is None


@pytest.mark.parametrize("target", list(TxnState))
def test_only_kafkas_previous_states_may_prepare_a_state(target: TxnState) -> None:
    for current in TxnState:
        m = meta(current, partitions={TP("a", 0)} if current is not TxnState.EMPTY else None)
        if current in VALID_PREVIOUS[target]:
            m._prepare(target, 1000, 1, -1, 60_000, frozenset(), NOW, NOW)
            assert m.pending_state is target
        else:
            with pytest.raises(IllegalTransition):
                m._prepare(target, 1000, 1, -1, 60_000, frozenset(), NOW, NOW)
            assert m.pending_state is None


def test_a_pending_transition_blocks_another() -> None:
    m = meta()
    m.prepare_add_partitions(frozenset({TP("a", 0)}), NOW)
    with pytest.raises(IllegalTransition):
        m.prepare_add_partitions(frozenset({TP("a", 1)}), NOW)
    m.abandon()
    assert m.state is TxnState.EMPTY and not m.partitions


def test_a_whole_transaction_commit() -> None:
    m = ongoing(TP("a", 0))
    assert m.state is TxnState.ONGOING and m.txn_start_timestamp == NOW
    m.complete(m.prepare_add_partitions(frozenset({TP("b", 1)}), NOW + 5))
    assert m.partitions == {TP("a", 0), TP("b", 1)} and m.txn_start_timestamp == NOW
    m.complete(m.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, NOW + 10))
    done = m.prepare_complete(NOW + 20)
    m.remove_partition(TP("a", 0))
    m.remove_partition(TP("b", 1))
    m.complete(done)
    assert (m.state, m.partitions, m.txn_last_update_timestamp) == (TxnState.COMPLETE_COMMIT, set(), NOW + 20)
    with pytest.raises(IllegalTransition):
        m.remove_partition(TP("a", 0))  # only while markers are being written


def test_completing_a_transition_not_prepared_fails() -> None:
    m = ongoing(TP("a", 0))
    other = TxnMetadata("t", 1000, 0, 60_000, TxnState.ONGOING, NOW, partitions={TP("a", 0)}, txn_start_timestamp=NOW)
    transit = other.prepare_abort_or_commit(TxnState.PREPARE_ABORT, NOW)
    with pytest.raises(IllegalTransition):
        m.complete(transit)


def test_epoch_bump_and_kip360_retry() -> None:
    m = meta(TxnState.COMPLETE_COMMIT, epoch=3)
    m.complete(m.prepare_increment_producer_epoch(30_000, None, NOW))
    assert (m.producer_epoch, m.last_producer_epoch, m.txn_timeout_ms) == (4, -1, 30_000)
    # KIP-360: the producer sends its current epoch; the bump records the last one
    bumped = m.prepare_increment_producer_epoch(30_000, 4, NOW)
    assert bumped is not None
    m.complete(bumped)
    assert (m.producer_epoch, m.last_producer_epoch) == (5, 4)
    # the same request retried (its answer was lost): the same epoch again
    retried = m.prepare_increment_producer_epoch(30_000, 4, NOW)
    assert retried is not None and retried.producer_epoch == 5
    m.abandon()
    assert m.prepare_increment_producer_epoch(30_000, 2, NOW) is None  # a fenced producer


def test_fence_bumps_once_even_after_a_failed_write() -> None:
    m = ongoing(TP("a", 0), epoch=7)
    assert m.prepare_fence_producer_epoch().producer_epoch == 8
    m.abandon()
    m.has_failed_epoch_fence = True
    assert m.prepare_fence_producer_epoch().producer_epoch == 7


# --- decisions ---------------------------------------------------------------------------------------------------


def test_init_producer_id_decisions() -> None:
    assert decisions.decide_init_producer_id(meta(), None).action is InitAction.BUMP
    assert decisions.decide_init_producer_id(ongoing(TP("a", 0)), None).action is InitAction.FENCE
    for prepare in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        assert decisions.decide_init_producer_id(meta(prepare), None).error is E.concurrent_transactions
    exhausted = meta(TxnState.COMPLETE_ABORT, epoch=32766)
    assert decisions.decide_init_producer_id(exhausted, None).action is InitAction.ROTATE
    assert decisions.decide_init_producer_id(meta(epoch=4), (999, 4)).error is E.producer_fenced
    assert decisions.decide_init_producer_id(meta(epoch=4), (1000, 2)).error is E.producer_fenced
    assert decisions.decide_init_producer_id(meta(epoch=4), (1000, 4)).action is InitAction.BUMP
    pending = meta()
    pending.prepare_add_partitions(frozenset({TP("a", 0)}), NOW)
    assert decisions.decide_init_producer_id(pending, None).error is E.concurrent_transactions


def test_add_partitions_decisions() -> None:
    a0 = frozenset({TP("a", 0)})
    assert decisions.decide_add_partitions(meta(), 1000, 0, a0) is None
    assert decisions.decide_add_partitions(meta(), 1001, 0, a0) is E.invalid_producer_id_mapping
    assert decisions.decide_add_partitions(meta(epoch=2), 1000, 1, a0) is E.producer_fenced
    assert decisions.decide_add_partitions(ongoing(TP("a", 0)), 1000, 0, a0) is E.none
    assert decisions.decide_add_partitions(meta(TxnState.PREPARE_COMMIT), 1000, 0, a0) is E.concurrent_transactions


def test_end_txn_decisions() -> None:
    m = ongoing(TP("a", 0))
    assert decisions.decide_end_txn(m, 1000, 0, True, True) is TxnState.PREPARE_COMMIT
    assert decisions.decide_end_txn(m, 1000, 0, False, True) is TxnState.PREPARE_ABORT
    assert decisions.decide_end_txn(m, 1, 0, True, True) is E.invalid_producer_id_mapping
    assert decisions.decide_end_txn(ongoing(TP("a", 0), epoch=3), 1000, 2, True, True) is E.producer_fenced
    assert decisions.decide_end_txn(meta(), 1000, 0, True, True) is E.invalid_txn_state
    assert decisions.decide_end_txn(meta(TxnState.COMPLETE_COMMIT), 1000, 0, True, True) is E.none
    assert decisions.decide_end_txn(meta(TxnState.COMPLETE_COMMIT), 1000, 0, False, True) is E.invalid_txn_state
    assert decisions.decide_end_txn(meta(TxnState.PREPARE_ABORT), 1000, 0, False, True) is E.concurrent_transactions
    assert decisions.decide_end_txn(meta(TxnState.PREPARE_ABORT), 1000, 0, True, True) is E.invalid_txn_state
    # the coordinator's own abort carries the bumped epoch
    fenced = ongoing(TP("a", 0))
    fenced.prepare_fence_producer_epoch()
    assert decisions.decide_end_txn(fenced, 1000, 1, False, False) is TxnState.PREPARE_ABORT
    assert decisions.decide_end_txn(ongoing(TP("a", 0)), 1000, 1, False, True) is E.producer_fenced


def test_verify_decisions() -> None:
    m = ongoing(TP("a", 0))
    assert decisions.decide_verify(m, 1000, 0, [TP("a", 0), TP("a", 1)]) == {
        TP("a", 0): E.none, TP("a", 1): E.transaction_abortable}
    assert decisions.decide_verify(None, 1000, 0, [TP("a", 0)]) == {TP("a", 0): E.invalid_producer_id_mapping}
    assert decisions.decide_verify(m, 1000, 1, [TP("a", 0)]) == {TP("a", 0): E.producer_fenced}


def test_timeouts_and_expiry() -> None:
    m = ongoing(TP("a", 0))
    assert not decisions.timed_out(m, NOW + 60_000) and decisions.timed_out(m, NOW + 60_001)
    idle = meta(TxnState.COMPLETE_COMMIT)
    assert decisions.expired(idle, NOW + 1000, 1000) and not decisions.expired(idle, NOW + 999, 1000)
    assert not decisions.expired(m, NOW + 10**9, 1000)  # an open transaction never expires
    assert decisions.to_client_error(E.producer_fenced, False) is E.invalid_producer_epoch
    assert decisions.to_client_error(E.producer_fenced, True) is E.producer_fenced


# --- record formats ----------------------------------------------------------------------------------------------


def test_key_bytes() -> None:
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(encode_key("tx-é")) == "tx-é"
    with pytest.raises(TxnLogError):
        decode_key(b"\x00\x01\x00\x02tx")


def test_value_v0_bytes_as_kafka_writes_them() -> None:
    transit = TxnTransit(5, -1, 2, -1, 60_000, TxnState.ONGOING, frozenset({TP("b", 1), TP("a", 3), TP("a", 0)}),
                         111, 222)
    expected = (struct.pack(">hqhib", 0, 5, 2, 60_000, 1) + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 3)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1)
                + struct.pack(">qq", 222, 111))
    assert encode_value(transit) == expected
    back = decode_value(expected)
    assert (back.producer_id, back.producer_epoch, back.state, back.partitions, back.txn_start_timestamp,
            back.txn_last_update_timestamp) == (5, 2, TxnState.ONGOING, transit.partitions, 111, 222)
    empty = TxnTransit(5, -1, 3, -1, 60_000, TxnState.EMPTY, frozenset(), -1, 333)
    assert encode_value(empty) == struct.pack(">hqhibiqq", 0, 5, 3, 60_000, 0, -1, 333, -1)


def test_value_v1_is_read() -> None:
    def uv(n: int) -> bytes:
        return bytes([n])  # small values only

    raw = (struct.pack(">hqhib", 1, 9, 4, 1000, 2) + uv(2) + uv(2) + b"t" + uv(2) + struct.pack(">i", 7) + uv(0)
           + struct.pack(">qq", 50, 40) + uv(1) + uv(0) + uv(8) + struct.pack(">q", 8))
    v = decode_value(raw)
    assert (v.producer_id, v.prev_producer_id, v.producer_epoch, v.state, v.partitions) == (
        9, 8, 4, TxnState.PREPARE_COMMIT, frozenset({TP("t", 7)}))
    with pytest.raises(TxnLogError):
        decode_value(raw[:-5])
    with pytest.raises(TxnLogError):
        decode_value(struct.pack(">h", 2) + raw[2:])


def test_partition_for_is_kafkas_utils_abs() -> None:
    # String.hashCode of "my-group" is -1906497762: Math.abs, not a mask (the mask would give 36)
    assert partition_for("my-group", 50) == 1906497762 % 50 == 12
    assert partition_for("tx1", 50) == 115245 % 50
    assert partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE


def test_a_client_cannot_end_a_transaction_being_fenced() -> None:
    fenced = ongoing(TP("a", 0))
    fenced.prepare_fence_producer_epoch()
    assert decisions.decide_end_txn(fenced, 1000, 0, True, True) is E.concurrent_transactions
    assert decisions.decide_end_txn(fenced, 1000, 0, False, True) is E.concurrent_transactions
