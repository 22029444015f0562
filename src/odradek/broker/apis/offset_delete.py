"""OffsetDelete (key 47), version 0: remove a group's committed offsets for some partitions.

As Kafka: the group must be known (GROUP_ID_NOT_FOUND) and coordinated here (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS). An Empty group, or one of standalone committers, loses the offsets asked for; a
consumer group with members keeps those of topics any member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC per partition)
and loses the rest; a non-consumer group with members is NON_EMPTY_GROUP. The removal is written to
``__consumer_offsets`` as tombstones before the answer. With an authorizer (as Kafka's KafkaApis) the group needs
DELETE (else GROUP_AUTHORIZATION_FAILED) and each topic READ (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authz.allowed(ctx, authz.Operation.DELETE, authz.ResourceType.GROUP, request.group_id):
        return fit(ctx.response_class, error_code=ErrorCode.group_authorization_failed, throttle_time=NO_THROTTLE,
                   topics=())
    readable = authz.authorized_names(ctx, authz.Operation.READ, authz.ResourceType.TOPIC,
                                      (t.name for t in request.topics))
    wanted = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions
              if t.name in readable]
    error, results = await ctx.services.groups.delete_offsets(request.group_id, wanted)
    results = {**results, **{TopicPartition(t.name, p.partition_index): ErrorCode.topic_authorization_failed
                             for t in request.topics if t.name not in readable for p in t.partitions}}
    partition_cls = nested(ctx, "OffsetDeleteResponsePartition")
    topic_cls = nested(ctx, "OffsetDeleteResponseTopic")
    topics: dict[str, list[Any]] = {}
    for tp, code in results.items():
        topics.setdefault(tp[0], []).append(partition_cls(partition_index=tp[1], error_code=code))
    return fit(ctx.response_class, error_code=error, throttle_time=NO_THROTTLE,
               topics=tuple(topic_cls(name=name, partitions=tuple(parts)) for name, parts in topics.items()))
