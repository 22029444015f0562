"""DescribeTopicPartitions (key 75), version 0 (KIP-966): the paginated topic description librdkafka 2.5+ uses for
``describe_topics``.

Topics are answered in name order (all of them for an empty list), starting at the request's cursor (topic and
first partition); at most ``response_partition_limit`` partitions (capped at Kafka's
``max.request.partition.size.limit`` default, 2000) go into one answer, and ``next_cursor`` names where the next
request should start when more remain. A cursor naming a topic the request does not list is INVALID_REQUEST, as in
Kafka. Unknown topics get UNKNOWN_TOPIC_OR_PARTITION; nothing is auto-created. Eligible leader replicas (KIP-966's
ELR) do not exist here: empty lists, as Kafka with ELR disabled answers. Without an authorizer, as Kafka, every
topic operation is authorized; with one, topics the principal may not DESCRIBE are left out of an all-topics answer
and answered TOPIC_AUTHORIZATION_FAILED (after the others, without their id) when named, and each topic's authorized
operations are those the principal has.
"""

from __future__ import annotations

import uuid
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode

API_KEY = 75
MIN_VERSION = 0
MAX_VERSION = 0

PARTITION_LIMIT = 2000  # Kafka's max.request.partition.size.limit
# READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what a topic supports
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


async def handle(ctx: RequestContext, request: Any) -> Any:
    cache = ctx.services.metadata
    partition_cls = nested(ctx, "DescribeTopicPartitionsResponsePartition")
    topic_cls = nested(ctx, "DescribeTopicPartitionsResponseTopic")
    cursor_cls = nested(ctx, "Cursor")
    names = sorted({t.name for t in request.topics}) if request.topics else sorted(cache.topics)
    refused: list[str] = []
    if ctx.services.authorizer is not None:
        visible = authz.authorized_names(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TOPIC, names)
        refused = [n for n in names if n not in visible] if request.topics else []
        names = [n for n in names if n in visible]
    cursor = request.cursor
    first_partition = 0
    if cursor is not None:
        if request.topics and cursor.topic_name not in names:
            # Kafka's getErrorResponse: the response has no top-level error, so every requested topic carries it
            return fit(ctx.response_class, throttle_time=NO_THROTTLE, next_cursor=None, topics=tuple(
                topic_cls(error_code=ErrorCode.invalid_request, name=n, topic_id=uuid.UUID(int=0), is_internal=False,
                          partitions=(), topic_authorized_operations=-(2**31)) for n in names))
        names = [n for n in names if n >= cursor.topic_name]
        first_partition = max(0, cursor.partition_index)
    budget = min(max(request.response_partition_limit, 1), PARTITION_LIMIT)
    live = set(cache.brokers)
    topics: list[Any] = []
    next_cursor = None
    for name in names:
        meta = cache.topics.get(name)
        if meta is None:
            topics.append(topic_cls(error_code=ErrorCode.unknown_topic_or_partition, name=name,
                                    topic_id=uuid.UUID(int=0), is_internal=False, partitions=(),
                                    topic_authorized_operations=_operations(ctx, name)))
            continue
        start = first_partition if cursor is not None and name == cursor.topic_name else 0
        indexes = sorted(i for i in meta.partitions if i >= start)
        if budget <= 0:
            next_cursor = cursor_cls(topic_name=name, partition_index=start)
            break
        taken, rest = indexes[:budget], indexes[budget:]
        budget -= len(taken)
        partitions = []
        for i in taken:
            p = meta.partitions[i]
            leader = p.leader if p.leader in live else -1
            partitions.append(partition_cls(
                error_code=ErrorCode.leader_not_available if leader < 0 else ErrorCode.none, partition_index=i,
                leader_id=leader, leader_epoch=p.leader_epoch, replica_nodes=tuple(p.replicas),
                isr_nodes=tuple(p.isr), eligible_leader_replicas=(), last_known_elr=(),
                offline_replicas=tuple(r for r in p.replicas if r not in live)))
        topics.append(topic_cls(error_code=ErrorCode.none, name=name, topic_id=meta.topic_id,
                                is_internal=meta.internal, partitions=tuple(partitions),
                                topic_authorized_operations=_operations(ctx, name)))
        if rest:
            next_cursor = cursor_cls(topic_name=name, partition_index=rest[0])
            break
    topics.extend(topic_cls(error_code=ErrorCode.topic_authorization_failed, name=name, topic_id=uuid.UUID(int=0),
                            is_internal=False, partitions=(), topic_authorized_operations=0) for name in refused)
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, topics=tuple(topics), next_cursor=next_cursor)


def _operations(ctx: RequestContext, name: str) -> int:
    if ctx.services.authorizer is None:
        return TOPIC_OPERATIONS
    return authz.authorized_operations(ctx, authz.ResourceType.TOPIC, name,
                                       (authz.Operation(op) for op in (3, 4, 5, 6, 7, 8, 10, 11)))
