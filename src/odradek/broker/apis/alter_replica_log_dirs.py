"""AlterReplicaLogDirs (key 34), versions 1-2.

Moves replicas this broker hosts to another of its log directories while they keep serving: a future log in the
destination catches up from the current one and is swapped in under the log's lock (odradek.broker.log.mover);
the answer comes as soon as the move has started, as Kafka's does (DescribeLogDirs shows its progress). Per
partition: LOG_DIR_NOT_FOUND for a path that is none of ``log.dirs``, KAFKA_STORAGE_ERROR for an offline
directory or replica, REPLICA_NOT_AVAILABLE for a replica this broker does not host; NONE when it is already there.
With an authorizer the request needs ALTER on the Cluster, else every partition gets CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode

API_KEY = 34
MIN_VERSION = 1
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    partition_cls = nested(ctx, "AlterReplicaLogDirPartitionResult")
    topic_cls = nested(ctx, "AlterReplicaLogDirTopicResult")
    logs = ctx.services.replicas.logs
    by_topic: dict[str, list[Any]] = {}
    permitted = authz.allowed(ctx, authz.Operation.ALTER, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME)
    for entry in request.dirs:
        for topic in entry.topics:
            for index in topic.partitions:
                if not permitted:
                    code = ErrorCode.cluster_authorization_failed
                elif logs is None:
                    code = ErrorCode.kafka_storage_error
                elif not ctx.services.replicas.hosts(topic.name, index):
                    code = ErrorCode.replica_not_available
                else:
                    code = logs.alter_log_dir(topic.name, index, entry.path)
                by_topic.setdefault(topic.name, []).append(partition_cls(partition_index=index, error_code=code))
    results = tuple(topic_cls(topic_name=name, partitions=tuple(parts)) for name, parts in by_topic.items())
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, results=results)
