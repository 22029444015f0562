"""A transactional id's state and the transitions Kafka allows between its states (KIP-98's TransactionMetadata).

Changes happen in two steps, as in Kafka: ``prepare_*`` computes the target (:class:`TxnTransit`) and marks the
metadata with a pending state, so a second request arriving while the first one's record is being written sees
"a transition in progress" (CONCURRENT_TRANSACTIONS); :meth:`TxnMetadata.complete` applies the target once the
record is durable in ``__transaction_state``, and :meth:`TxnMetadata.abandon` drops the pending state when the write
failed. Nothing here does I/O or reads a clock: the caller passes ``now_ms``.

States and their ids are Kafka's (they are written to the log as ``TransactionStatus``):

======================  ==  ======================================================
Empty                   0   no transaction (new id, or after InitProducerId)
Ongoing                 1   partitions or offsets added
PrepareCommit           2   EndTxn(commit) durable; markers being written
PrepareAbort            3   EndTxn(abort), a timeout or a fence durable; markers being written
CompleteCommit          4   every COMMIT marker written
CompleteAbort           5   every ABORT marker written
Dead                    6   being expired (never written; its record is a tombstone)
PrepareEpochFence       7   pending only: fencing an older producer, becomes PrepareAbort
======================  ==  ======================================================
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from odradek.placement.model import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767  # Short.MaxValue


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions report (Kafka's ``TransactionState.name``)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}
"""Kafka's ``validPreviousStates``: a target state may be prepared only from these."""


class IllegalTransition(RuntimeError):
    """A transition Kafka's state machine forbids: a bug in the caller, never a client's fault."""


def epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps Short.MaxValue in reserve so the coordinator can always fence the current producer."""
    return epoch >= MAX_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The target of a transition: exactly what the ``__transaction_state`` record says."""

    producer_id: int
    prev_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(eq=False, slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState
    txn_last_update_timestamp: int
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    pending_state: TxnState | None = None
    has_failed_epoch_fence: bool = False
    """A fence whose record could not be written: the next fence reuses its epoch rather than bumping again."""

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    # --- preparing transitions ------------------------------------------------------------------------------

    def _prepare(self, state: TxnState, producer_id: int, epoch: int, last_epoch: int, timeout_ms: int,
                 partitions: frozenset[TopicPartition], start: int, now_ms: int) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: preparing {state.kafka_name} while "
                                    f"{self.pending_state.kafka_name} is pending")
        if producer_id < 0:
            raise IllegalTransition(f"{self.transactional_id}: illegal producer id {producer_id}")
        if state is not TxnState.DEAD and epoch < 0:
            raise IllegalTransition(f"{self.transactional_id}: illegal producer epoch {epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}")
        self.pending_state = state
        return TxnTransit(producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, partitions, start,
                          now_ms)

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Bump the epoch to fence the producer of an ongoing transaction, which is then aborted."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence epoch {self.producer_epoch}")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, self.producer_id, epoch, NO_PRODUCER_EPOCH,
                             self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransit | None:
        """InitProducerId's epoch bump (KIP-360 when ``expected_epoch`` is given); None means PRODUCER_FENCED."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: epochs of producer {self.producer_id} exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a bump whose answer was lost: the same epoch again, not another bump
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(TxnState.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        if self.state in (TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.PREPARE_COMMIT):
            raise IllegalTransition(f"{self.transactional_id}: rotating producer ids with a transaction pending")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(TxnState.EMPTY, new_producer_id, 0, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added: frozenset[TopicPartition], now_ms: int) -> TxnTransit:
        starting = self.state in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT)
        start = now_ms if starting else self.txn_start_timestamp
        return self._prepare(TxnState.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions) | added, start, now_ms)

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int) -> TxnTransit:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.partitions), self.txn_start_timestamp, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(state, self.producer_id, self.producer_epoch, self.producer_epoch, self.txn_timeout_ms,
                             frozenset(), self.txn_start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(TxnState.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def switch_fence_to_abort(self, fenced_epoch: int) -> None:
        """A pending PrepareEpochFence makes way for PrepareAbort at the bumped epoch (Kafka's endTransaction)."""
        self.pending_state = None
        self.producer_epoch = fenced_epoch
        self.last_producer_epoch = NO_PRODUCER_EPOCH

    # --- completing ---------------------------------------------------------------------------------------------

    def abandon(self) -> None:
        """The record for the pending transition was not written: nothing changes."""
        self.pending_state = None

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker was written to ``tp``; what remains is what the completion still waits for."""
        if self.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise IllegalTransition(f"{self.transactional_id}: removing {tp} in state {self.state.kafka_name}")
        self.partitions.discard(tp)

    def complete(self, transit: TxnTransit) -> None:
        """Apply ``transit`` now that its record is durable (Kafka's completeTransitionTo, with its checks)."""
        to = self.pending_state
        if to is None or to is not transit.state:
            raise IllegalTransition(f"{self.transactional_id}: completing {transit.state.kafka_name} but pending "
                                    f"is {to.kafka_name if to else None}")
        same_producer = transit.producer_id == self.producer_id and transit.producer_epoch == self.producer_epoch
        if to is TxnState.EMPTY:
            bump = transit.producer_epoch == self.producer_epoch + 1 or (
                transit.producer_epoch == 0 and transit.producer_id != self.producer_id)
            if (transit.producer_epoch != self.producer_epoch and not bump) or transit.partitions \
                    or transit.txn_start_timestamp != -1:
                raise IllegalTransition(f"{self.transactional_id}: bad InitProducerId transition {transit}")
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.previous_producer_id = transit.prev_producer_id
        elif to is TxnState.ONGOING:
            if not same_producer or not self.partitions <= transit.partitions \
                    or self.txn_timeout_ms != transit.txn_timeout_ms:
                raise IllegalTransition(f"{self.transactional_id}: bad AddPartitions transition {transit}")
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.partitions |= transit.partitions
        elif to in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            if not same_producer or set(self.partitions) != transit.partitions \
                    or self.txn_timeout_ms != transit.txn_timeout_ms \
                    or self.txn_start_timestamp != transit.txn_start_timestamp:
                raise IllegalTransition(f"{self.transactional_id}: bad EndTxn transition {transit}")
        elif to in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            if not same_producer or self.txn_timeout_ms != transit.txn_timeout_ms \
                    or transit.txn_start_timestamp == -1:
                raise IllegalTransition(f"{self.transactional_id}: bad completion {transit}")
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.partitions.clear()
        else:
            raise IllegalTransition(f"{self.transactional_id}: {to.kafka_name} is never completed")
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to

    @classmethod
    def from_transit(cls, transactional_id: str, transit: TxnTransit) -> TxnMetadata:
        """Rebuild from a record read back from the log (what Kafka's loader does)."""
        partitions = set() if transit.state is TxnState.EMPTY else set(transit.partitions)
        return cls(transactional_id, transit.producer_id, transit.producer_epoch, transit.txn_timeout_ms,
                   transit.state, transit.txn_last_update_timestamp, previous_producer_id=transit.prev_producer_id,
                   last_producer_epoch=NO_PRODUCER_EPOCH, partitions=partitions,
                   txn_start_timestamp=transit.txn_start_timestamp)
