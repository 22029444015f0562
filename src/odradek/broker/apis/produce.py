"""Produce (key 0), versions 3-12.

Each partition's record set is validated (magic 2, length, CRC-32C, lastOffsetDelta, codec) and appended as the
batches arrived, only baseOffset and partitionLeaderEpoch rewritten in place; topics with
``message.timestamp.type=LogAppendTime`` get the broker's clock. Idempotent batches are checked against the
producer's sequence state in the log: a retried batch is acknowledged with its original offset, a gap is
OUT_OF_ORDER_SEQUENCE_NUMBER. acks=0 gets no response; acks=1 answers after the leader's append; acks=-1 waits
until every ISR member has the batch (the high watermark passes it) within the request's timeout, refusing with
NOT_ENOUGH_REPLICAS before the append when the ISR is below ``min.insync.replicas`` (capped at the replication
factor) and NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank meanwhile.

Transactional batches (KIP-98) need the request's transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as
Kafka answers without one). When the producer has no open transaction on a partition in this epoch, the broker first
asks the transaction coordinator whether the partition was added to the transaction (KIP-890 part 1, Kafka 3.6+):
INVALID_TXN_STATE if not; its retriable errors arrive as NOT_ENOUGH_REPLICAS, which producers retry. A
marker written while that question was out invalidates the answer (INVALID_TXN_STATE), so a late batch never reopens
an ended transaction. The log then checks epochs (INVALID_PRODUCER_EPOCH), sequences, and that a producer with an
open transaction writes only transactional batches (INVALID_TXN_STATE). A compacted topic refuses records without a
key (INVALID_RECORD with one record error each, as Kafka's LogValidator).

Client quotas (``producer_byte_rate``): once the request is done, its size is recorded against the client's quota
as Kafka's KafkaApis does; over it, the response carries the throttle time and the connection is muted that long
(KIP-219), acks=0 included.

With an authorizer (as Kafka's KafkaApis): a request carrying transactional batches needs WRITE on its
transactional id, else every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; each topic needs WRITE, else its
partitions get TOPIC_AUTHORIZATION_FAILED, before any other check. (Idempotent producers are checked when they ask
for a producer id, InitProducerId, as Kafka has done since 2.8; Produce itself does not check IDEMPOTENT_WRITE.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import Encoded, RequestContext
from odradek.broker.replica import Partition
from odradek.broker.topics import INTERNAL_TOPICS
from odradek.broker.txn.service import to_producer
from odradek.errors import ErrorCode, KafkaError, RecordValidationError
from odradek.placement.model import TopicPartition
from odradek.protocol.encoders import ProducePartitionResult, encode_produce_response
from odradek.protocol.records import HEADER_SIZE, read_header

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 12

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending:
    """One partition of the request between its checks and its append."""

    topic: str
    data: Any
    result: ProducePartitionResult
    producer: tuple[int, int] | None = None  # (producer id, epoch) of a transactional batch
    verification: object = None  # the log's token while the coordinator is asked


@dataclass(slots=True)
class Appended:
    """A Produce whose appends are done: what is left is waiting for replication (acks=all) and the response."""

    ctx: RequestContext
    acks: int
    timeout_s: float
    results: list[tuple[str, list[ProducePartitionResult]]]
    waits: list[tuple[ProducePartitionResult, Partition, int]]

    async def response(self) -> Encoded | None:
        """The response once every acks=all partition is replicated (or timed out); None for acks=0. The request
        is recorded against the client's quota now, when it is done, and ``ctx.throttle_ms`` set."""
        waits = self.waits
        if len(waits) == 1:  # the usual case, awaited in place: a gather costs event-loop passes before the ack
            result, part, offset = waits[0]
            await _await_replication(result, part, offset, self.timeout_s)
        elif waits:
            await asyncio.gather(*(_await_replication(r, p, offset, self.timeout_s) for r, p, offset in waits))
        ctx = self.ctx
        ctx.throttle_ms = ctx.services.quotas.throttle_produce(ctx.principal, ctx.client_id, ctx.size)
        if self.acks == 0:
            return None
        return Encoded(encode_produce_response(ctx.api_version, self.results, ctx.throttle_ms))


async def handle(ctx: RequestContext, request: Any) -> Encoded | None:
    return await (await append(ctx, request)).response()


async def append(ctx: RequestContext, request: Any) -> Appended:
    """Check and append every partition; a transactional request first asks its coordinator (KIP-890)."""
    results, pending = _stage(ctx, request)
    await _verify(ctx, request.transactional_id, pending)
    return _append(ctx, request, results, pending)


def append_now(ctx: RequestContext, request: Any) -> Appended:
    """:func:`append` for a request without a transactional id, which has no coordinator to ask: it runs without
    yielding to the event loop, so a connection appends every Produce already in its buffer before any follower's
    fetch is answered, and one replication round carries them all."""
    if request.transactional_id is not None:
        raise ValueError("a transactional Produce must go through append()")
    results, pending = _stage(ctx, request)
    return _append(ctx, request, results, pending)


def _stage(ctx: RequestContext, request: Any) -> tuple[list[tuple[str, list[ProducePartitionResult]]],
                                                         list[_Pending]]:
    services = ctx.services
    acks = request.acks
    results: list[tuple[str, list[ProducePartitionResult]]] = []
    pending: list[_Pending] = []
    denied: set[str] = set()
    if services.authorizer is not None:
        if not _transactional_id_authorized(ctx, request):
            for t in request.topic_data:
                results.append((t.name, [
                    ProducePartitionResult(p.index, int(ErrorCode.transactional_id_authorization_failed))
                    for p in t.partition_data]))
            return results, pending
        names = {t.name for t in request.topic_data}
        denied = names - authz.authorized_names(ctx, authz.Operation.WRITE, authz.ResourceType.TOPIC, names)
    for topic in request.topic_data:
        parts: list[ProducePartitionResult] = []
        results.append((topic.name, parts))
        for pdata in topic.partition_data:
            result = ProducePartitionResult(pdata.index)
            parts.append(result)
            item = _Pending(topic.name, pdata, result)
            try:
                if denied and topic.name in denied:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                if acks not in (0, 1, -1):
                    raise KafkaError(ErrorCode.invalid_required_acks)
                if topic.name in INTERNAL_TOPICS:
                    raise KafkaError(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic.name}")
                if pdata.records is None or not _one_v2_batch(pdata.records):
                    raise KafkaError(ErrorCode.invalid_record)  # Kafka's ProduceRequest.validateRecords
                services.replicas.leader_partition(topic.name, pdata.index)
                item.producer = _transactional_producer(pdata.records)
                if item.producer is not None and request.transactional_id is None:
                    raise KafkaError(ErrorCode.transactional_id_authorization_failed,
                                     "transactional records in a request without a transactional id")
                pending.append(item)
            except KafkaError as exc:
                _refuse(result, topic.name, pdata.index, exc)
    return results, pending


def _append(ctx: RequestContext, request: Any, results: list[tuple[str, list[ProducePartitionResult]]],
            pending: list[_Pending]) -> Appended:
    services = ctx.services
    acks = request.acks
    waits: list[tuple[ProducePartitionResult, Partition, int]] = []
    for item in pending:
        result, index = item.result, item.data.index
        if result.error_code:
            continue
        try:
            part = services.replicas.leader_partition(item.topic, index)
            if item.producer is not None and item.verification is not None and not part.log.txn_verification_current(
                item.producer[0], item.verification
            ):
                raise KafkaError(ErrorCode.invalid_txn_state,
                                 "the transaction ended while the partition was being verified")
            if acks == -1:
                min_isr = min(int(part.log.config.min_insync_replicas), len(part.replicas))
                if len(part.isr) < min_isr:
                    raise KafkaError(
                        ErrorCode.not_enough_replicas,
                        f"The size of the current ISR {part.isr} is insufficient to satisfy the min.isr "
                        f"requirement of {min_isr} for partition {item.topic}-{index}",
                    )
            appended = services.replicas.append_records(part, item.data.records)
            result.base_offset = appended.first_offset
            result.log_append_time_ms = appended.log_append_time_ms
            result.log_start_offset = appended.log_start_offset
            if acks == -1:
                waits.append((result, part, appended.last_offset + 1))
        except KafkaError as exc:
            _refuse(result, item.topic, index, exc)
            if exc.code not in _UNKNOWN_APPEND_INFO:
                current = services.replicas.get(TopicPartition(item.topic, index))
                result.log_start_offset = current.log.log_start_offset if current is not None else -1
    return Appended(ctx, acks, request.timeout.total_seconds(), results, waits)


_UNKNOWN_APPEND_INFO = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.not_leader_or_follower,
                                  ErrorCode.message_too_large, ErrorCode.record_list_too_large,
                                  ErrorCode.corrupt_message, ErrorCode.kafka_storage_error})
"""Errors Kafka's ReplicaManager answers with no log start offset (-1); after any other failed append it reports the
partition's log start offset."""

_INVALID_TIMESTAMP = "One or more records have been rejected due to invalid timestamp"


def _one_v2_batch(records: bytes | bytearray | memoryview) -> bool:
    """Exactly one whole batch, of magic 2: what Kafka's ProduceRequest.validateRecords demands of v3+ requests
    (INVALID_RECORD otherwise, before any other check of the batch)."""
    view = memoryview(records)
    if len(view) < 17 or view[16] != 2:
        return False
    return 12 + int.from_bytes(view[8:12], "big", signed=True) == len(view)


def _refuse(result: ProducePartitionResult, topic: str, index: int, exc: KafkaError, *,
            custom_message: bool = False) -> None:
    """Kafka's PartitionResponse carries a message only where its ReplicaManager made a custom one (record
    validation, transaction verification); every other error goes without."""
    result.error_code = int(exc.code)
    if exc.code == ErrorCode.invalid_timestamp:
        # the record index is the first record's: the header's timestamps stand for the records between them
        result.record_errors = [(0, exc.message)]
        result.error_message = _INVALID_TIMESTAMP
    elif exc.code == ErrorCode.invalid_record or custom_message:
        result.error_message = exc.message
        if isinstance(exc, RecordValidationError):
            result.record_errors = list(exc.record_errors)
    if exc.code not in (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition,
                        ErrorCode.topic_authorization_failed):
        log.info("produce to %s-%d refused: %s", topic, index, exc)


def _transactional_id_authorized(ctx: RequestContext, request: Any) -> bool:
    """Kafka's check: a request with transactional batches needs WRITE on its transactional id."""
    transactional = any(pdata.records is not None and _transactional_producer(pdata.records) is not None
                        for t in request.topic_data for pdata in t.partition_data)
    if not transactional:
        return True
    tid = request.transactional_id
    return tid is not None and authz.allowed(ctx, authz.Operation.WRITE, authz.ResourceType.TRANSACTIONAL_ID, tid)


def _transactional_producer(records: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """``(producer id, epoch)`` when the first batch is transactional (a malformed set is refused by the append's
    own validation)."""
    if len(records) < HEADER_SIZE:
        return None
    header = read_header(records)
    if header.magic != 2 or not header.is_transactional or header.producer_id < 0:
        return None
    return header.producer_id, header.producer_epoch


async def _verify(ctx: RequestContext, transactional_id: str | None, pending: list[_Pending]) -> None:
    """KIP-890: before a producer's first batch of a transaction lands on a partition, ask its coordinator
    whether the partition was added to that transaction; all partitions of the request at once."""
    if transactional_id is None:
        return
    transactions = ctx.services.transactions
    asked: list[tuple[_Pending, Awaitable[ErrorCode]]] = []
    for item in pending:
        if item.producer is None:
            continue
        pid, epoch = item.producer
        try:
            part = ctx.services.replicas.leader_partition(item.topic, item.data.index)
            if part.log.has_ongoing_transaction(pid, epoch):
                continue
            item.verification = part.log.start_txn_verification(pid)
        except KafkaError as exc:
            _refuse(item.result, item.topic, item.data.index, exc)
            continue
        asked.append((item, transactions.partition_verification(transactional_id, pid, epoch, item.topic,
                                                                item.data.index)))
    if not asked:
        return
    codes = await asyncio.gather(*(call for _, call in asked), return_exceptions=True)
    for (item, _), code in zip(asked, codes, strict=True):
        if isinstance(code, BaseException):
            log.warning("verifying %s-%d for transactional id %s failed: %r", item.topic, item.data.index,
                        transactional_id, code)
            code = ErrorCode.coordinator_not_available
        if code != ErrorCode.none:
            error = _verification_error(ErrorCode(code))
            _refuse(item.result, item.topic, item.data.index, error, custom_message=error.message is not None)


def _verification_error(underlying: ErrorCode) -> KafkaError:
    """The coordinator's answer as the partition's error, translated as Kafka's ReplicaManager does: retriable
    ones to NOT_ENOUGH_REPLICAS naming the coordinator's error, INVALID_TXN_STATE with its own message, the rest
    without one."""
    code = to_producer(underlying)
    if code == ErrorCode.invalid_txn_state and underlying == ErrorCode.invalid_txn_state:
        return KafkaError(code, "Partition was not added to the transaction")
    if code == ErrorCode.not_enough_replicas:
        return KafkaError(code, "Unable to verify the partition has been added to the transaction. Underlying "
                                f"error: {underlying.name.upper()}")
    return KafkaError(code)


async def _await_replication(result: ProducePartitionResult, part: Partition, offset: int, timeout_s: float) -> None:
    try:
        done = await part.wait_for_hw(offset, timeout_s)
    except KafkaError as exc:
        result.error_code = int(exc.code)
        return
    if not done:
        result.error_code = int(ErrorCode.request_timed_out)
        return
    min_isr = min(int(part.log.config.min_insync_replicas), len(part.replicas))
    if len(part.isr) < min_isr:
        result.error_code = int(ErrorCode.not_enough_replicas_after_append)
