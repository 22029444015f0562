"""DescribeLogDirs (key 35), versions 1-4.

Every log directory of this broker (``log.dirs``): an online one with the partitions it holds (size on disk, the
offset lag, and the future logs of replicas moving into it with ``is_future_key`` set), an offline one with
KAFKA_STORAGE_ERROR and no partitions, as Kafka's ReplicaManager.describeLogDirs answers. The lag of a current log
is how far its log end offset is behind the high watermark (Kafka's getLogEndOffsetLag; 0 for a leader), that of a
future log how far it is behind the current log. Version 4 adds the directory's total and usable bytes. ``topics``
null asks for every partition. With an authorizer the request needs DESCRIBE on the Cluster, else the request-wide
error code (v3+) is CLUSTER_AUTHORIZATION_FAILED and no directory is listed, as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 4


def _wanted(request: Any) -> set[TopicPartition] | None:
    if request.topics is None:
        return None
    return {TopicPartition(t.topic, p) for t in request.topics for p in t.partitions}


async def handle(ctx: RequestContext, request: Any) -> Any:
    partition_cls = nested(ctx, "DescribeLogDirsPartition")
    topic_cls = nested(ctx, "DescribeLogDirsTopic")
    result_cls = nested(ctx, "DescribeLogDirsResult")
    logs = ctx.services.replicas.logs
    if not authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
                   results=())
    wanted = _wanted(request)
    results = []
    for state in logs.describe() if logs is not None else []:
        if not state.online:
            results.append(result_cls(error_code=ErrorCode.kafka_storage_error, log_dir=str(state.path), topics=(),
                                      total_bytes=-1, usable_bytes=-1))
            continue
        by_topic: dict[str, list[Any]] = {}
        for tp, size in sorted(state.partition_sizes.items()):
            if wanted is not None and tp not in wanted:
                continue
            plog = logs.get(*tp) if logs is not None else None
            lag = max(0, plog.high_watermark - plog.log_end_offset) if plog is not None else 0
            by_topic.setdefault(tp[0], []).append(
                partition_cls(partition_index=tp[1], partition_size=size, offset_lag=lag, is_future_key=False))
        for tp, (size, lag) in sorted(state.futures.items()):
            if wanted is not None and tp not in wanted:
                continue
            by_topic.setdefault(tp[0], []).append(
                partition_cls(partition_index=tp[1], partition_size=size, offset_lag=lag, is_future_key=True))
        topics = tuple(topic_cls(name=name, partitions=tuple(parts)) for name, parts in sorted(by_topic.items()))
        results.append(result_cls(error_code=ErrorCode.none, log_dir=str(state.path), topics=topics,
                                  total_bytes=state.total_bytes, usable_bytes=state.usable_bytes))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=tuple(results))
