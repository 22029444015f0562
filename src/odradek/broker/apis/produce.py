"""Produce (key 0), versions 3-12.

Each partition's record set is validated (magic 2, length, CRC-32C, lastOffsetDelta, codec) and appended as the
batches arrived, only baseOffset and partitionLeaderEpoch rewritten in place; topics with
``message.timestamp.type=LogAppendTime`` get the broker's clock. Idempotent batches are checked against the
producer's sequence state in the log: a retried batch is acknowledged with its original offset, a gap is
OUT_OF_ORDER_SEQUENCE_NUMBER. acks=0 gets no response; acks=1 answers after the leader's append; acks=-1 waits
until every ISR member has the batch (the high watermark passes it) within the request's timeout, refusing with
NOT_ENOUGH_REPLICAS before the append when the ISR is below ``min.insync.replicas`` (capped at the replication
factor) and NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank meanwhile. Transactions are not supported: a
transactional produce is refused per partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from odradek.broker.apis import Encoded, RequestContext
from odradek.broker.replica import Partition
from odradek.broker.topics import INTERNAL_TOPICS
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.encoders import ProducePartitionResult, encode_produce_response

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 12

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: Any) -> Encoded | None:
    services = ctx.services
    acks = request.acks
    timeout_s = request.timeout.total_seconds()
    results: list[tuple[str, list[ProducePartitionResult]]] = []
    waits: list[tuple[ProducePartitionResult, Partition, int]] = []
    for topic in request.topic_data:
        parts: list[ProducePartitionResult] = []
        results.append((topic.name, parts))
        for pdata in topic.partition_data:
            result = ProducePartitionResult(pdata.index)
            parts.append(result)
            try:
                if acks not in (0, 1, -1):
                    raise KafkaError(ErrorCode.invalid_required_acks)
                if request.transactional_id is not None:
                    raise KafkaError(ErrorCode.transactional_id_authorization_failed, "transactions are not supported")
                if topic.name in INTERNAL_TOPICS:
                    raise KafkaError(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic.name}")
                if pdata.records is None:
                    raise KafkaError(ErrorCode.invalid_record, "no records")
                part = services.replicas.leader_partition(topic.name, pdata.index)
                if acks == -1:
                    min_isr = min(int(part.log.config.min_insync_replicas), len(part.replicas))
                    if len(part.isr) < min_isr:
                        raise KafkaError(
                            ErrorCode.not_enough_replicas,
                            f"The size of the current ISR {part.isr} is insufficient to satisfy the min.isr "
                            f"requirement of {min_isr} for partition {topic.name}-{pdata.index}",
                        )
                appended, part = services.replicas.append_records(topic.name, pdata.index, pdata.records)
                result.base_offset = appended.first_offset
                result.log_append_time_ms = appended.log_append_time_ms
                result.log_start_offset = appended.log_start_offset
                if acks == -1:
                    waits.append((result, part, appended.last_offset + 1))
            except KafkaError as exc:
                result.error_code = int(exc.code)
                result.error_message = exc.message
                if exc.code not in (ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_or_partition):
                    log.info("produce to %s-%d refused: %s", topic.name, pdata.index, exc)
    if waits:
        await asyncio.gather(*(_await_replication(r, p, offset, timeout_s) for r, p, offset in waits))
    if acks == 0:
        return None
    return Encoded(encode_produce_response(ctx.api_version, results))


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
