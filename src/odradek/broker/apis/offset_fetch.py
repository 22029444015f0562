"""OffsetFetch (key 9), versions 1-9: read a group's committed offsets.

Offsets are returned whatever the group's state (a standalone consumer has no membership). A partition with no
commit gets offset -1 and empty metadata with no error; ``topics`` null (v2+) means every partition the group
committed. v1 reports a group-level failure on each partition, v2+ in the top-level error code; v8+ fetch
several groups in one request, each answered on its own. ``require_stable`` (v7+, KIP-447): a requested
partition whose offset may still change — a transaction committed offsets for it and its marker has not arrived,
or a plain commit is in flight — gets UNSTABLE_OFFSET_COMMIT (offset -1) and the client retries, as Kafka
answers; without it the last visible offset is returned. A request for all partitions is never unstable (Kafka
checks only the partitions named). v10 (topic ids) is not served.

With an authorizer (as Kafka's KafkaApis): a group needs DESCRIBE (else GROUP_AUTHORIZATION_FAILED for that group);
offsets of topics the principal may not DESCRIBE are left out of an all-partitions answer, and named ones get
TOPIC_AUTHORIZATION_FAILED (offset -1) without the coordinator being asked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.group.schema import OffsetValue
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition

API_KEY = 9
MIN_VERSION = 1
MAX_VERSION = 9

_GroupAnswer = tuple[ErrorCode, list[tuple[str, list[tuple[int, OffsetValue | None, ErrorCode]]]]]


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 8:
        group_cls = nested(ctx, "OffsetFetchResponseGroup")
        groups = []
        for g in request.groups:
            error, topics = _fetch(ctx, g.group_id, g.topics, request.require_stable)
            groups.append(
                group_cls(
                    group_id=g.group_id,
                    error_code=error,
                    topics=_topics(ctx, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", topics),
                )
            )
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, groups=tuple(groups))
    error, topics = _fetch(ctx, request.group_id, request.topics, getattr(request, "require_stable", False))
    if ctx.api_version < 2 and error is not ErrorCode.none:
        topics = [(name, [(p, None, error) for p, _, _ in parts]) for name, parts in topics]
    return fit(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=error,
        topics=_topics(ctx, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition", topics),
    )


def _fetch(ctx: RequestContext, group_id: str, requested: Any, require_stable: bool) -> _GroupAnswer:
    """Ask the coordinator; keep the request's topic order, or the committed order when all were asked for."""
    if ctx.services.authorizer is not None:
        if not authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.GROUP, group_id):
            return ErrorCode.group_authorization_failed, [
                (t.name, [(p, None, ErrorCode.group_authorization_failed) for p in t.partition_indexes])
                for t in requested or ()]
        error, topics = _fetch_checked(ctx, group_id, requested, require_stable)
        visible = authz.authorized_names(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TOPIC,
                                         (name for name, _ in topics))
        answered = [(name, parts) for name, parts in topics if name in visible]
        if requested is not None:
            answered += [(name, [(p, None, ErrorCode.topic_authorization_failed) for p, _, _ in parts])
                         for name, parts in topics if name not in visible]
        return error, answered
    return _fetch_checked(ctx, group_id, requested, require_stable)


def _fetch_checked(ctx: RequestContext, group_id: str, requested: Any, require_stable: bool) -> _GroupAnswer:
    wanted = None if requested is None else [TopicPartition(t.name, p) for t in requested for p in t.partition_indexes]
    error, offsets = ctx.services.groups.fetch_offsets(group_id, wanted)
    unstable = (
        ctx.services.groups.unstable_offsets(group_id, wanted)
        if require_stable and wanted is not None and error is ErrorCode.none
        else set()
    )
    by_topic: dict[str, list[tuple[int, OffsetValue | None, ErrorCode]]] = {}
    if requested is None:
        if error is ErrorCode.none:
            for (topic, partition), value in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append((partition, value, ErrorCode.none))
    else:
        for t in requested:
            parts = by_topic.setdefault(t.name, [])
            for p in t.partition_indexes:
                tp = TopicPartition(t.name, p)
                if tp in unstable:
                    parts.append((p, None, ErrorCode.unstable_offset_commit))
                else:
                    parts.append((p, offsets.get(tp), ErrorCode.none))
    return error, list(by_topic.items())


def _topics(
    ctx: RequestContext,
    topic_name: str,
    partition_name: str,
    topics: list[tuple[str, list[tuple[int, OffsetValue | None, ErrorCode]]]],
) -> tuple[Any, ...]:
    topic_cls = nested(ctx, topic_name)
    partition_cls: Callable[..., Any] = nested(ctx, partition_name)
    return tuple(
        topic_cls(
            name=name,
            partitions=tuple(
                partition_cls(
                    partition_index=p,
                    committed_offset=value.offset if value is not None else -1,
                    committed_leader_epoch=value.leader_epoch if value is not None else -1,
                    metadata=value.metadata if value is not None else "",
                    error_code=error,
                )
                for p, value, error in parts
            ),
        )
        for name, parts in topics
    )
