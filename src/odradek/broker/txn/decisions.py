"""What the coordinator answers, decided from a transactional id's metadata alone (Kafka's TransactionCoordinator).

Each function looks at a :class:`~odradek.broker.txn.state.TxnMetadata` and a request and says what to do: answer an
error code now, or which transition to prepare. No I/O, no clock: the coordinator performs the writes and marker
sends these decisions call for, so every answer of the state machine is testable on its own.

PRODUCER_FENCED is what these return for a stale epoch; the API modules turn it into INVALID_PRODUCER_EPOCH for the
request versions that predate it, as Kafka's KafkaApis does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from odradek.broker.txn.state import NO_PRODUCER_EPOCH, TxnMetadata, TxnState, epoch_exhausted
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition


class InitAction(enum.Enum):
    BUMP = "bump"
    """Prepare Empty with the epoch bumped (or kept, for a retried KIP-360 bump)."""
    ROTATE = "rotate"
    """The epoch is exhausted: prepare Empty with a new producer id at epoch 0."""
    FENCE = "fence"
    """A transaction is ongoing: bump the epoch, abort it, answer CONCURRENT_TRANSACTIONS (the client retries)."""


@dataclass(frozen=True, slots=True)
class InitDecision:
    error: ErrorCode = ErrorCode.none
    action: InitAction | None = None


def decide_init_producer_id(meta: TxnMetadata, expected: tuple[int, int] | None) -> InitDecision:
    """InitProducerId for an existing id; ``expected`` is the (producer id, epoch) a KIP-360 client sends."""
    if meta.pending:
        return InitDecision(ErrorCode.concurrent_transactions)
    if expected is not None:
        pid, epoch = expected
        valid = (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
                 or (pid == meta.previous_producer_id and epoch_exhausted(epoch)))
        if not valid:
            return InitDecision(ErrorCode.producer_fenced)
    state = meta.state
    if state in (TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT):
        return InitDecision(ErrorCode.concurrent_transactions)
    if state in (TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT, TxnState.EMPTY):
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            return InitDecision(action=InitAction.ROTATE)
        if expected is not None and not (
            meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch
            or expected[1] == meta.last_producer_epoch
        ):
            return InitDecision(ErrorCode.producer_fenced)
        return InitDecision(action=InitAction.BUMP)
    if state is TxnState.ONGOING:
        return InitDecision(action=InitAction.FENCE)
    return InitDecision(ErrorCode.unknown_server_error)  # Dead or PrepareEpochFence are never current states


def decide_add_partitions(meta: TxnMetadata, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> ErrorCode | None:
    """AddPartitionsToTxn / AddOffsetsToTxn: an error to answer (NONE: already added), or None to add them."""
    if meta.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if meta.producer_epoch != producer_epoch:
        return ErrorCode.producer_fenced
    if meta.pending or meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return ErrorCode.concurrent_transactions
    if meta.state is TxnState.ONGOING and set(partitions) <= meta.partitions:
        return ErrorCode.none
    return None


def decide_verify(meta: TxnMetadata | None, producer_id: int, producer_epoch: int,
                  partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """KIP-890 verification: is each partition in the producer's ongoing transaction (nothing is changed)."""
    parts = list(partitions)
    if meta is None or meta.producer_id != producer_id:
        return dict.fromkeys(parts, ErrorCode.invalid_producer_id_mapping)
    if meta.producer_epoch != producer_epoch:
        return dict.fromkeys(parts, ErrorCode.producer_fenced)
    if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return dict.fromkeys(parts, ErrorCode.concurrent_transactions)
    return {tp: ErrorCode.none if tp in meta.partitions else ErrorCode.transaction_abortable for tp in parts}


def decide_end_txn(meta: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool,
                   from_client: bool) -> ErrorCode | TxnState:
    """EndTxn (or the coordinator's own abort): an error to answer (NONE for a retried, finished end), or the
    Prepare state to move to."""
    if meta.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    # the coordinator's own aborts (timeout, fence) carry the bumped epoch, which is ahead of the stored one
    valid_epoch = (not from_client or producer_epoch == meta.producer_epoch) and producer_epoch >= meta.producer_epoch
    if not valid_epoch:
        return ErrorCode.producer_fenced
    if meta.pending and (meta.pending_state is not TxnState.PREPARE_EPOCH_FENCE or from_client or commit):
        # only the coordinator's own abort may follow a fence it prepared
        return ErrorCode.concurrent_transactions
    state = meta.state
    if state is TxnState.ONGOING:
        return TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if state is TxnState.COMPLETE_COMMIT:
        return ErrorCode.none if commit else ErrorCode.invalid_txn_state
    if state is TxnState.COMPLETE_ABORT:
        return ErrorCode.invalid_txn_state if commit else ErrorCode.none
    if state is TxnState.PREPARE_COMMIT:
        return ErrorCode.concurrent_transactions if commit else ErrorCode.invalid_txn_state
    if state is TxnState.PREPARE_ABORT:
        return ErrorCode.invalid_txn_state if commit else ErrorCode.concurrent_transactions
    if state is TxnState.EMPTY:
        return ErrorCode.invalid_txn_state
    return ErrorCode.unknown_server_error  # Dead or PrepareEpochFence are never current states


def decide_after_prepare(meta: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode | None:
    """Once PrepareCommit/PrepareAbort is durable: None to send the markers, else the error to answer."""
    if meta.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if meta.producer_epoch != producer_epoch:
        return ErrorCode.producer_fenced
    if meta.pending:
        return ErrorCode.concurrent_transactions
    expected = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if meta.state is not expected:
        return ErrorCode.invalid_txn_state
    return None


def timed_out(meta: TxnMetadata, now_ms: int) -> bool:
    """An ongoing transaction past its timeout (Kafka's timedOutTransactions)."""
    return (not meta.pending and meta.state is TxnState.ONGOING
            and meta.txn_start_timestamp + meta.txn_timeout_ms < now_ms)


def expired(meta: TxnMetadata, now_ms: int, expiration_ms: int) -> bool:
    """An id idle past ``transactional.id.expiration.ms`` with no transaction open (Kafka's shouldExpire)."""
    return (not meta.pending and meta.state.expiration_allowed
            and meta.txn_last_update_timestamp <= now_ms - expiration_ms)


def to_client_error(error: ErrorCode, fenced_supported: bool) -> ErrorCode:
    """PRODUCER_FENCED is new in InitProducerId v4, EndTxn/AddPartitionsToTxn/AddOffsetsToTxn v2; older versions get
    INVALID_PRODUCER_EPOCH, which their clients handle the same way."""
    if error is ErrorCode.producer_fenced and not fenced_supported:
        return ErrorCode.invalid_producer_epoch
    return error
