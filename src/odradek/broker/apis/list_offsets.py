"""ListOffsets (key 2), versions 1-11.

Timestamp -1 answers the latest offset a consumer may read: the high watermark, or under isolation_level 1
(READ_COMMITTED, v2+) the last stable offset; a timestamp look-up (-3 included) likewise answers only offsets below
that bound, as Kafka's Partition.fetchOffsetForTimestamp does.
-2 the log start offset, -3 (v7+) the offset and timestamp of the record with the
largest timestamp, -4 and -5 (tiered storage) the log start offset, as there is no remote tier. Any other value
finds the first batch whose max timestamp is at or after it, answering offset -1 when none is. Followers' requests
(replica id >= 0) read up to the log end. Leader epoch checks give FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH.
A leader whose high watermark has not yet reached the start of its epoch (just after a failover) answers a client's
"latest", or a timestamp look-up that would land at or past the high watermark, with OFFSET_NOT_AVAILABLE (KIP-207),
so an offset a client was shown never appears to move backwards. With an authorizer, each topic needs DESCRIBE, else
its partitions get TOPIC_AUTHORIZATION_FAILED (as Kafka's KafkaApis).
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode, KafkaError

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5
READ_COMMITTED = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    partition_response = nested(ctx, "ListOffsetsPartitionResponse")
    topic_response = nested(ctx, "ListOffsetsTopicResponse")
    committed = request.replica_id < 0 and getattr(request, "isolation_level", 0) == READ_COMMITTED
    topics = []
    allowed = authz.authorized_names(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TOPIC,
                                     (t.name for t in request.topics))
    for t in request.topics:
        parts = []
        for p in t.partitions:
            error, offset, timestamp, epoch = ErrorCode.none, -1, -1, -1
            try:
                if t.name not in allowed:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                part = services.replicas.leader_partition(t.name, p.partition_index,
                                                          getattr(p, "current_leader_epoch", -1))
                plog = part.log
                ts = p.timestamp
                lagging = request.replica_id < 0 and part.high_watermark_lagging
                fetchable = part.last_stable_offset if committed else part.high_watermark
                if ts == LATEST:
                    if lagging:
                        raise KafkaError(ErrorCode.offset_not_available)
                    offset = plog.log_end_offset if request.replica_id >= 0 else fetchable
                elif ts in (EARLIEST, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD):
                    offset = plog.log_start_offset
                elif ts == MAX_TIMESTAMP:
                    found = plog.offset_for_timestamp(MAX_TIMESTAMP)
                    if found is not None and (request.replica_id >= 0 or found[0] < fetchable):
                        offset, timestamp = found
                else:
                    found = plog.offset_for_timestamp(ts)
                    if lagging and (found is None or found[0] >= part.high_watermark):
                        raise KafkaError(ErrorCode.offset_not_available)
                    if found is not None and (request.replica_id >= 0 or found[0] < fetchable):
                        offset, timestamp = found
                if offset >= 0:
                    epoch = _epoch_at(plog.epoch_entries, offset)
            except KafkaError as exc:
                error = exc.code
            parts.append(
                partition_response(
                    partition_index=p.partition_index, error_code=error, timestamp=timestamp, offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(topic_response(name=t.name, partitions=tuple(parts)))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _epoch_at(entries: list[tuple[int, int]], offset: int) -> int:
    """The leader epoch that wrote ``offset``: the last epoch whose start offset is at or before it."""
    epoch = -1
    for e, start in entries:
        if start <= offset:
            epoch = e
    return epoch
