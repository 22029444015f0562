"""DeleteRecords (key 21), versions 0-2.

The leader of each partition moves its log start offset to the requested offset (-1 means the high watermark) and
drops the segments wholly below it; the new start offset is checkpointed with the others
(``log-start-offset-checkpoint``) and ListOffsets EARLIEST answers it from then on. Followers learn it from the
``log_start_offset`` of their Fetch responses and advance their own; their next fetch reports it back. As Kafka's
DelayedDeleteRecords, a partition's answer waits, within ``timeout_ms``, until every ISR replica's log start offset
has reached the requested offset and then carries that ``low_watermark``; past the timeout it is REQUEST_TIMED_OUT
(the deletion stands). Errors per partition: OFFSET_OUT_OF_RANGE beyond the high watermark or below -1,
POLICY_VIOLATION on a topic whose ``cleanup.policy`` lacks ``delete`` (Kafka refuses to delete records of a purely
compacted topic), NOT_LEADER_OR_FOLLOWER elsewhere, UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist;
with an authorizer, TOPIC_AUTHORIZATION_FAILED for topics the principal may not DELETE.
"""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, deadline_of, fit, nested
from odradek.broker.replica import Partition
from odradek.errors import ErrorCode, KafkaError

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

# How often a waiting answer looks at the ISR's start offsets again (Kafka's purgatory is checked on every
# follower fetch; the followers fetch continuously, so a short poll sees the same moments).
_POLL_S = 0.01


def _delete(part: Partition, offset: int) -> int:
    if "delete" not in part.log.config.cleanup_policy:
        raise KafkaError(ErrorCode.policy_violation,
                         f"Records of partition {part.topic}-{part.index} can not be deleted due to the configured "
                         "policy")
    if offset < -1:
        raise KafkaError(ErrorCode.offset_out_of_range, f"Cannot delete records before offset {offset}")
    return part.log.delete_records_before(offset, part.high_watermark)


async def handle(ctx: RequestContext, request: Any) -> Any:
    deadline = deadline_of(request.timeout)
    partition_cls = nested(ctx, "DeleteRecordsPartitionResult")
    topic_cls = nested(ctx, "DeleteRecordsTopicResult")
    # (topic, index) -> [error, low watermark, the partition still to wait for, the offset it must reach]
    results: dict[tuple[str, int], list[Any]] = {}
    deletable = authz.authorized_names(ctx, authz.Operation.DELETE, authz.ResourceType.TOPIC,
                                       (t.name for t in request.topics))
    for topic in request.topics:
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            try:
                if topic.name not in deletable:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                part = ctx.services.replicas.leader_partition(topic.name, p.partition_index)
                target = _delete(part, p.offset)
                results[key] = [ErrorCode.none, -1, part, target]
            except KafkaError as exc:
                results[key] = [exc.code, -1, None, -1]
    loop = asyncio.get_running_loop()
    while True:
        waiting = False
        for entry in results.values():
            part = entry[2]
            if part is None:
                continue
            if not part.is_leader:
                entry[0], entry[2] = ErrorCode.not_leader_or_follower, None
            elif part.low_watermark() >= entry[3]:
                entry[1], entry[2] = part.low_watermark(), None
            else:
                waiting = True
        if not waiting:
            break
        if deadline is None or loop.time() >= deadline:
            for entry in results.values():
                if entry[2] is not None:
                    entry[0], entry[2] = ErrorCode.request_timed_out, None
            break
        await asyncio.sleep(min(_POLL_S, max(0.0, deadline - loop.time())))
    topics: dict[str, list[Any]] = {}
    for (name, index), (error, low, _part, _target) in results.items():
        topics.setdefault(name, []).append(partition_cls(partition_index=index, low_watermark=low, error_code=error))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE,
               topics=tuple(topic_cls(name=name, partitions=tuple(parts)) for name, parts in topics.items()))
