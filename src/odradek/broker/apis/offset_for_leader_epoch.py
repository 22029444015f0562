"""OffsetForLeaderEpoch (key 23), versions 2-4.

For each partition this broker leads: the largest leader epoch not above the requested one and the offset where it
ended (the start of the next epoch, or the log end for the current one), from the leader-epoch cache — (-1, -1)
when the log knows no such epoch. A follower that changed leader asks this before fetching and truncates to the
answer (KIP-101), never blindly to its high watermark; consumers use it to detect log truncation (KIP-320).
``current_leader_epoch`` is checked: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER. With an
authorizer, CLUSTER_ACTION on the Cluster (followers) or DESCRIBE on the topic (consumers, KIP-320) is needed, else
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode, KafkaError

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    result_cls = nested(ctx, "EpochEndOffset")
    topic_cls = nested(ctx, "OffsetForLeaderTopicResult")
    topics = []
    names = {t.topic for t in request.topics}
    if not authz.allowed(ctx, authz.Operation.CLUSTER_ACTION, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        names = authz.authorized_names(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TOPIC, names)
    for t in request.topics:
        parts = []
        for p in t.partitions:
            error, epoch, end = ErrorCode.none, -1, -1
            try:
                if t.topic not in names:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                part = ctx.services.replicas.leader_partition(t.topic, p.partition, p.current_leader_epoch)
                epoch, end = part.log.end_offset_for_epoch(p.leader_epoch)
            except KafkaError as exc:
                error = exc.code
            parts.append(result_cls(error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(topic_cls(topic=t.topic, partitions=tuple(parts)))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, topics=tuple(topics))
