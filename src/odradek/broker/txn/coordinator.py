"""The transaction coordinator: transactional ids on ``__transaction_state``, as Kafka's TransactionCoordinator and
TransactionStateManager keep them.

A transactional id belongs to partition ``abs(javaHash(id)) % transaction.state.log.num.partitions``; the leader of
that partition coordinates it. Becoming leader loads the partition (:meth:`load_partition`) at a *coordinator epoch*
equal to the partition's leader epoch; losing it unloads it. Until loading is done, requests for its ids get
COORDINATOR_LOAD_IN_PROGRESS; for ids of partitions not loaded here, NOT_COORDINATOR.

Every change is a :class:`~odradek.broker.txn.state.TxnTransit` written as one record to the id's partition
(acks=all) and applied to memory only once durable, checked against the coordinator epoch it was prepared under, so
a coordinator that lost its partition mid-write never applies a stale change. EndTxn answers the client once
PrepareCommit/PrepareAbort is durable; the :class:`~odradek.broker.txn.markers.MarkerSender` then writes the
markers and the completion (CompleteCommit/CompleteAbort) is written when the last one is acknowledged. A loaded
PrepareCommit/PrepareAbort is completed the same way, so a commit survives the coordinator's failover.

Decisions are :mod:`odradek.broker.txn.decisions`'; this module does the I/O around them. Time is the injected clock:
the broker's tick calls :meth:`tick`, which aborts timed-out transactions (with an epoch bump that fences their
producer) every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` and expires idle ids every
``transaction.remove.expired.transaction.cleanup.interval.ms``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from odradek.broker.txn import decisions
from odradek.broker.txn.config import TRANSACTION_STATE_TOPIC, TxnConfig
from odradek.broker.txn.log_format import TxnLogError, decode_key, decode_value, encode_key, encode_value
from odradek.broker.txn.markers import PendingCompletion
from odradek.broker.txn.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TxnMetadata,
    TxnState,
    TxnTransit,
)
from odradek.clock import Clock
from odradek.errors import ErrorCode, KafkaError
from odradek.placement.java import coordinator_partition
from odradek.placement.model import TopicPartition
from odradek.protocol.records import BatchHeader, Record, encode_batch

log = logging.getLogger(__name__)

LOAD_YIELD_EVERY = 64
COMPLETION_RETRY_S = 0.1

_APPEND_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
}
"""How a failed append to ``__transaction_state`` reaches the client (Kafka's appendTransactionToLog)."""


class TxnLog(Protocol):
    """The coordinator's window onto ``__transaction_state`` (the broker's ``OffsetsTopicLog`` for that topic)."""

    async def append(self, partition: int, batch: bytearray) -> None: ...

    def read(self, partition: int) -> Iterator[tuple[BatchHeader, list[Record]]]: ...


class MarkerSink(Protocol):
    def add(self, pending: PendingCompletion) -> None: ...

    def remove_for_partition(self, txn_partition: int) -> None: ...


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % n`` (TransactionStateManager.partitionFor)."""
    return coordinator_partition(transactional_id, num_partitions)


@dataclass(slots=True)
class _Loaded:
    coordinator_epoch: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    def __init__(self, broker_id: int, clock: Clock, txn_log: TxnLog, config: TxnConfig,
                 next_producer_id: Callable[[], Awaitable[int]], markers: MarkerSink) -> None:
        self.broker_id = broker_id
        self.config = config
        self._clock = clock
        self._log = txn_log
        self._next_producer_id = next_producer_id
        self.markers = markers
        self._loaded: dict[int, _Loaded] = {}
        self._loading: dict[int, int] = {}  # partition -> coordinator epoch being loaded
        self._tasks: set[asyncio.Task[Any]] = set()
        self._next_abort_check = 0
        self._next_expiry_check = 0
        self.active = True

    # --- ownership ------------------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    def _lookup(self, transactional_id: str) -> tuple[ErrorCode, int, TxnMetadata | None]:
        """(error, coordinator epoch, metadata): Kafka's getTransactionState."""
        partition = self.partition_for(transactional_id)
        if partition in self._loading:
            return ErrorCode.coordinator_load_in_progress, -1, None
        loaded = self._loaded.get(partition)
        if loaded is None:
            return ErrorCode.not_coordinator, -1, None
        return ErrorCode.none, loaded.coordinator_epoch, loaded.txns.get(transactional_id)

    def _current(self, transactional_id: str, coordinator_epoch: int) -> TxnMetadata | None:
        error, epoch, meta = self._lookup(transactional_id)
        return meta if error is ErrorCode.none and epoch == coordinator_epoch else None

    def load_partition(self, partition: int, coordinator_epoch: int) -> None:
        """This broker leads ``partition`` at ``coordinator_epoch``: read it back, then serve its ids."""
        loaded = self._loaded.get(partition)
        if self._loading.get(partition) == coordinator_epoch or (
                loaded is not None and loaded.coordinator_epoch == coordinator_epoch):
            return
        log.debug("broker %d: elected transaction coordinator for %s-%d at epoch %d", self.broker_id,
                  TRANSACTION_STATE_TOPIC, partition, coordinator_epoch)
        self.markers.remove_for_partition(partition)
        self._loaded.pop(partition, None)
        self._loading[partition] = coordinator_epoch
        self._spawn(self._load(partition, coordinator_epoch))

    async def _load(self, partition: int, coordinator_epoch: int) -> None:
        txns: dict[str, TxnMetadata] = {}
        records = 0
        try:
            for n, (header, batch) in enumerate(self._log.read(partition), 1):
                if not header.is_control:
                    for record in batch:
                        records += 1
                        self._replay(txns, record, partition)
                if n % LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    if self._loading.get(partition) != coordinator_epoch:
                        return
        except Exception as exc:
            # not loaded: its ids answer NOT_COORDINATOR, and the next leadership change loads it again
            if isinstance(exc, KafkaError):
                log.warning("loading %s-%d stopped: %s", TRANSACTION_STATE_TOPIC, partition, exc)
            else:
                log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, partition)
            if self._loading.get(partition) == coordinator_epoch:
                del self._loading[partition]
            return
        if self._loading.get(partition) != coordinator_epoch:
            return
        self._loaded[partition] = _Loaded(coordinator_epoch, txns)
        del self._loading[partition]
        now = self._clock.now_ms()
        to_complete = []
        for meta in txns.values():
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                to_complete.append(self._pending_completion(meta, coordinator_epoch, now))
        log.log(logging.INFO if records else logging.DEBUG,
                "broker %d: loaded %d transactional ids from %s-%d at coordinator epoch %d (%d records), "
                "completing %d", self.broker_id, len(txns), TRANSACTION_STATE_TOPIC, partition, coordinator_epoch,
                records, len(to_complete))
        for pending in to_complete:
            self.markers.add(pending)

    @staticmethod
    def _replay(txns: dict[str, TxnMetadata], record: Record, partition: int) -> None:
        if record.key is None:
            log.warning("skipping a keyless record in %s-%d", TRANSACTION_STATE_TOPIC, partition)
            return
        try:
            tid = decode_key(record.key)
            if record.value is None:
                txns.pop(tid, None)
            else:
                txns[tid] = TxnMetadata.from_transit(tid, decode_value(record.value))
        except TxnLogError as exc:
            log.warning("skipping an unreadable record in %s-%d: %s", TRANSACTION_STATE_TOPIC, partition, exc)

    def unload_partition(self, partition: int) -> None:
        """Leadership of ``partition`` moved: forget its ids (their state is in the log for the next leader)."""
        self._loading.pop(partition, None)
        if self._loaded.pop(partition, None) is not None:
            log.info("broker %d: resigned as transaction coordinator for %s-%d", self.broker_id,
                     TRANSACTION_STATE_TOPIC, partition)
        self.markers.remove_for_partition(partition)

    # --- writing transitions ----------------------------------------------------------------------------------

    async def _append(self, transactional_id: str, coordinator_epoch: int, transit: TxnTransit | None,
                      retry_on_error: Callable[[ErrorCode], bool] = lambda _e: False) -> ErrorCode:
        """Write ``transit`` (None: a tombstone) and apply it; the error a client should see if that failed."""
        meta = self._current(transactional_id, coordinator_epoch)
        if meta is None:
            error, _epoch, _meta = self._lookup(transactional_id)
            return error if error is not ErrorCode.none else ErrorCode.not_coordinator
        value = None if transit is None else encode_value(transit)
        batch = encode_batch([(encode_key(transactional_id), value, ())], timestamp_ms=self._clock.now_ms())
        try:
            await self._log.append(self.partition_for(transactional_id), batch)
            error = ErrorCode.none
        except KafkaError as exc:
            error = _APPEND_ERRORS.get(exc.code, exc.code)
        except Exception:
            log.exception("appending to %s for %s failed", TRANSACTION_STATE_TOPIC, transactional_id)
            error = ErrorCode.unknown_server_error
        current = self._current(transactional_id, coordinator_epoch)
        if error is ErrorCode.none:
            if current is None or current is not meta:
                return ErrorCode.not_coordinator
            if transit is not None:
                meta.complete(transit)
            return ErrorCode.none
        log.info("writing %s for %s to %s failed: %s", transit.state.kafka_name if transit else "a tombstone",
                 transactional_id, TRANSACTION_STATE_TOPIC, error.name)
        if current is meta and not retry_on_error(error):
            meta.abandon()
        return error

    # --- InitProducerId ---------------------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch) for a transactional producer's InitProducerId."""
        if not transactional_id:
            return ErrorCode.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return ErrorCode.invalid_transaction_timeout, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        error, coordinator_epoch, meta = self._lookup(transactional_id)
        if error is not ErrorCode.none:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if meta is None:
            try:
                pid = await self._next_producer_id()
            except KafkaError as exc:
                return exc.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            error, coordinator_epoch, meta = self._lookup(transactional_id)
            if error is not ErrorCode.none:
                return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            if meta is None:
                meta = TxnMetadata(transactional_id, pid, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY,
                                   self._clock.now_ms())
                self._loaded[self.partition_for(transactional_id)].txns[transactional_id] = meta
        decision = decisions.decide_init_producer_id(meta, expected)
        if decision.action is decisions.InitAction.ROTATE:
            try:
                new_pid = await self._next_producer_id()
            except KafkaError as exc:
                return exc.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            # the allocation awaited: decide again on what the metadata is now
            if self._current(transactional_id, coordinator_epoch) is not meta:
                return ErrorCode.not_coordinator, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            decision = decisions.decide_init_producer_id(meta, expected)
        if decision.action is None:
            return decision.error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        now = self._clock.now_ms()
        if decision.action is decisions.InitAction.FENCE:
            transit = meta.prepare_fence_producer_epoch()
            error, _pid, _epoch = await self._end(transactional_id, transit.producer_id, transit.producer_epoch,
                                                  commit=False, from_client=False)
            return (error if error is not ErrorCode.none else ErrorCode.concurrent_transactions,
                    NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if decision.action is decisions.InitAction.ROTATE:
            transit = meta.prepare_producer_id_rotation(new_pid, timeout_ms, now, expected is not None)
        else:
            bumped = meta.prepare_increment_producer_epoch(timeout_ms, expected[1] if expected else None, now)
            if bumped is None:
                return ErrorCode.producer_fenced, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            transit = bumped
        error = await self._append(transactional_id, coordinator_epoch, transit)
        if error is not ErrorCode.none:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        log.info("initialized transactional id %s with producer id %d epoch %d", transactional_id,
                 transit.producer_id, transit.producer_epoch)
        return ErrorCode.none, transit.producer_id, transit.producer_epoch

    # --- AddPartitionsToTxn / AddOffsetsToTxn / verification -------------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        parts = frozenset(partitions)
        error, coordinator_epoch, meta = self._lookup(transactional_id)
        if error is not ErrorCode.none:
            return error
        if meta is None:
            return ErrorCode.invalid_producer_id_mapping
        answer = decisions.decide_add_partitions(meta, producer_id, producer_epoch, parts)
        if answer is not None:
            return answer
        transit = meta.prepare_add_partitions(parts, self._clock.now_ms())
        return await self._append(transactional_id, coordinator_epoch, transit)

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        parts = list(partitions)
        if not transactional_id:
            return dict.fromkeys(parts, ErrorCode.invalid_request)
        error, _epoch, meta = self._lookup(transactional_id)
        if error is not ErrorCode.none:
            return dict.fromkeys(parts, error)
        return decisions.decide_verify(meta, producer_id, producer_epoch, parts)

    # --- EndTxn -----------------------------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> tuple[ErrorCode, int, int]:
        return await self._end(transactional_id, producer_id, producer_epoch, commit, from_client=True)

    async def _end(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                   from_client: bool) -> tuple[ErrorCode, int, int]:
        if not transactional_id:
            return ErrorCode.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        error, coordinator_epoch, meta = self._lookup(transactional_id)
        if error is not ErrorCode.none:
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if meta is None:
            return ErrorCode.invalid_producer_id_mapping, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        decided = decisions.decide_end_txn(meta, producer_id, producer_epoch, commit, from_client)
        if isinstance(decided, ErrorCode):
            if decided is ErrorCode.none:
                return decided, meta.producer_id, meta.producer_epoch
            if meta.pending_state is TxnState.PREPARE_EPOCH_FENCE:
                meta.abandon()
            return decided, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        fencing = meta.pending_state is TxnState.PREPARE_EPOCH_FENCE
        if fencing:
            meta.switch_fence_to_abort(producer_epoch)
        transit = meta.prepare_abort_or_commit(decided, self._clock.now_ms())
        error = await self._append(transactional_id, coordinator_epoch, transit)
        if error is not ErrorCode.none:
            if fencing and self._current(transactional_id, coordinator_epoch) is meta:
                meta.has_failed_epoch_fence = True
                log.warning("fencing %s: writing epoch %d failed with %s; the epoch was not returned",
                            transactional_id, producer_epoch, error.name)
            return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        current = self._current(transactional_id, coordinator_epoch)
        if current is None:
            return ErrorCode.not_coordinator, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        refused = decisions.decide_after_prepare(current, producer_id, producer_epoch, commit)
        if refused is not None:
            return refused, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        self.markers.add(self._pending_completion(current, coordinator_epoch, self._clock.now_ms()))
        return ErrorCode.none, current.producer_id, current.producer_epoch

    def _pending_completion(self, meta: TxnMetadata, coordinator_epoch: int, now_ms: int) -> PendingCompletion:
        commit = meta.state is TxnState.PREPARE_COMMIT
        transit = meta.prepare_complete(now_ms)
        return PendingCompletion(meta.transactional_id, self.partition_for(meta.transactional_id), coordinator_epoch,
                                 commit, meta.producer_id, meta.producer_epoch, meta, transit,
                                 self._write_completion)

    def _write_completion(self, pending: PendingCompletion) -> None:
        """Every marker is written: record CompleteCommit/CompleteAbort (retried while the log is unavailable)."""
        self._spawn(self._complete(pending))

    async def _complete(self, pending: PendingCompletion) -> None:
        tid = pending.transactional_id
        while self.active:
            meta = self._current(tid, pending.coordinator_epoch)
            if meta is not pending.metadata:
                log.info("not completing %s: no longer its coordinator at epoch %d", tid, pending.coordinator_epoch)
                return
            error = await self._append(tid, pending.coordinator_epoch, pending.transit,
                                       retry_on_error=lambda e: e is ErrorCode.coordinator_not_available)
            if error is ErrorCode.none:
                log.debug("completed transaction of %s: %s", tid, pending.transit.state.kafka_name)
                return
            if error is not ErrorCode.coordinator_not_available:
                log.info("completing %s's transaction stopped: %s", tid, error.name)
                return
            await self._clock.sleep(COMPLETION_RETRY_S)

    # --- DescribeTransactions / ListTransactions --------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        if not self.active:
            return ErrorCode.coordinator_not_available, None
        if not transactional_id:
            return ErrorCode.invalid_request, None
        error, _epoch, meta = self._lookup(transactional_id)
        if error is not ErrorCode.none:
            return error, None
        if meta is None or meta.state is TxnState.DEAD:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, meta

    def list_transactions(self, producer_ids: set[int], states: set[str],
                          duration_ms: int = -1) -> tuple[ErrorCode, list[TxnListing], list[str]]:
        """(error, listings, unknown state filters), Kafka's listTransactionStates."""
        if not self.active:
            return ErrorCode.coordinator_not_available, [], []
        if self._loading:
            return ErrorCode.coordinator_load_in_progress, [], []
        wanted = {s for name in states if (s := TxnState.from_name(name)) is not None}
        unknown = [name for name in states if TxnState.from_name(name) is None]
        now = self._clock.now_ms()
        out = []
        for loaded in self._loaded.values():
            for meta in loaded.txns.values():
                if meta.state is TxnState.DEAD:
                    continue
                if producer_ids and meta.producer_id not in producer_ids:
                    continue
                if states and meta.state not in wanted:
                    continue
                if duration_ms >= 0 and now - meta.txn_start_timestamp <= duration_ms:
                    continue
                out.append(TxnListing(meta.transactional_id, meta.producer_id, meta.state.kafka_name))
        return ErrorCode.none, out, unknown

    # --- time -------------------------------------------------------------------------------------------------

    async def tick(self, now_ms: int | None = None) -> None:
        now = self._clock.now_ms() if now_ms is None else now_ms
        mono = self._clock.monotonic_ms()
        if mono >= self._next_abort_check:
            self._next_abort_check = mono + self.config.abort_timed_out_interval_ms
            self.abort_timed_out(now)
        if mono >= self._next_expiry_check:
            self._next_expiry_check = mono + self.config.remove_expired_interval_ms
            self.remove_expired(now)

    def abort_timed_out(self, now_ms: int) -> int:
        """Abort every transaction past its timeout, bumping the epoch so its producer is fenced (Kafka's
        abortTimedOutTransactions); returns how many aborts were started."""
        started = 0
        for loaded in list(self._loaded.values()):
            for meta in list(loaded.txns.values()):
                if decisions.timed_out(meta, now_ms):
                    self._spawn(self._abort_timed_out(meta, loaded.coordinator_epoch, now_ms))
                    started += 1
        return started

    async def _abort_timed_out(self, meta: TxnMetadata, coordinator_epoch: int, now_ms: int) -> None:
        # checked again and fenced in the same step as the abort is prepared: nothing can come in between
        if self._current(meta.transactional_id, coordinator_epoch) is not meta or not decisions.timed_out(meta, now_ms):
            return
        log.info("aborting %s's transaction: open longer than its timeout of %d ms", meta.transactional_id,
                 meta.txn_timeout_ms)
        transit = meta.prepare_fence_producer_epoch()
        error, _pid, _epoch = await self._end(meta.transactional_id, transit.producer_id, transit.producer_epoch,
                                              commit=False, from_client=False)
        if error is not ErrorCode.none:
            log.info("rolling back %s's timed-out transaction: %s", meta.transactional_id, error.name)

    def remove_expired(self, now_ms: int) -> int:
        """Tombstone ids idle past ``transactional.id.expiration.ms``; returns how many were started."""
        started = 0
        for partition, loaded in list(self._loaded.items()):
            expiring = [m for m in loaded.txns.values() if decisions.expired(m, now_ms, self.config.id_expiration_ms)]
            if expiring:
                for meta in expiring:
                    meta.prepare_dead()
                started += len(expiring)
                self._spawn(self._expire(partition, loaded.coordinator_epoch, expiring))
        return started

    async def _expire(self, partition: int, coordinator_epoch: int, expiring: list[TxnMetadata]) -> None:
        batch = encode_batch([(encode_key(m.transactional_id), None, ()) for m in expiring],
                             timestamp_ms=self._clock.now_ms())
        try:
            await self._log.append(partition, batch)
            error = ErrorCode.none
        except KafkaError as exc:
            error = exc.code
        loaded = self._loaded.get(partition)
        for meta in expiring:
            current = loaded.txns.get(meta.transactional_id) if loaded else None
            if current is not meta:
                continue
            if (error is ErrorCode.none and loaded is not None and loaded.coordinator_epoch == coordinator_epoch
                    and meta.pending_state is TxnState.DEAD):
                del loaded.txns[meta.transactional_id]
                log.info("expired transactional id %s", meta.transactional_id)
            else:
                meta.abandon()

    # --- tasks ------------------------------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_log_failure)

    def owned_partitions(self) -> dict[int, int]:
        """Loaded partitions and their coordinator epochs."""
        return {p: loaded.coordinator_epoch for p, loaded in self._loaded.items()}

    async def shutdown(self) -> None:
        self.active = False
        for partition in list(self._loaded) + list(self._loading):
            self.unload_partition(partition)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        if isinstance(exc, IllegalTransition):
            log.error("transaction coordinator: illegal transition: %s", exc)
        else:
            log.error("transaction coordinator task failed", exc_info=exc)
