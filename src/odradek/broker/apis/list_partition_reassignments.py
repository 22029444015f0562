"""ListPartitionReassignments (key 46), version 0.

The reassignments in progress on the active controller (all, or those of the named partitions), each with its full
replica set and the replicas being added and removed. Non-controllers answer NOT_CONTROLLER. With an authorizer
the request needs DESCRIBE on the Cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import NOT_CONTROLLER_MESSAGE, ErrorCode, KafkaError

API_KEY = 46
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    part_cls = nested(ctx, "OngoingPartitionReassignment")
    topic_cls = nested(ctx, "OngoingTopicReassignment")
    wanted = None
    if request.topics is not None:
        wanted = [(t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    error = ErrorCode.none
    message: str | None = ""  # Kafka leaves the message at its default, "", on success
    states: dict[Any, Any] = {}
    controller = ctx.services.controller
    if not authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        error = ErrorCode.cluster_authorization_failed
    elif not controller.is_active:
        error, message = ErrorCode.not_controller, NOT_CONTROLLER_MESSAGE
    else:
        try:
            states = await controller.list_partition_reassignments(wanted)
        except KafkaError as exc:
            error, message = exc.code, exc.message
    by_topic: dict[str, list[Any]] = {}
    for tp, st in sorted(states.items()):
        by_topic.setdefault(tp[0], []).append(
            part_cls(partition_index=tp[1], replicas=tuple(st.replicas), adding_replicas=tuple(st.adding),
                     removing_replicas=tuple(st.removing))
        )
    return fit(
        ctx.response_class, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
        topics=tuple(topic_cls(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
    )
