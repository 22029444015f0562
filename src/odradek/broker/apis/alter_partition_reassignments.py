"""AlterPartitionReassignments (key 45), versions 0-1.

Starts (target replica list) or cancels (null) partition reassignments on the active controller, which runs
Kafka's OAR/RAR flow: add the new replicas, wait for them to join the ISR, move leadership if needed, then stop and
delete the old replicas. Non-controllers answer NOT_CONTROLLER (Kafka's message, no partitions). Per partition:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS for a cancel with nothing to
cancel. With an authorizer the
request needs ALTER on the Cluster, else CLUSTER_AUTHORIZATION_FAILED at the top level and for every partition.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import NOT_CONTROLLER_MESSAGE, ErrorCode, KafkaError

API_KEY = 45
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    part_cls = nested(ctx, "ReassignablePartitionResponse")
    topic_cls = nested(ctx, "ReassignableTopicResponse")
    wanted = {
        (t.name, p.partition_index): (None if p.replicas is None else [int(r) for r in p.replicas])
        for t in request.topics for p in t.partitions
    }
    top_error = ErrorCode.none
    top_message: str | None = ""  # Kafka leaves the message at its default, "", on success
    outcomes: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    controller = ctx.services.controller
    if not authz.allowed(ctx, authz.Operation.ALTER, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        top_error = ErrorCode.cluster_authorization_failed
    elif not controller.is_active:  # Kafka: the error's own message and no per-partition answers
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.not_controller,
                   error_message=NOT_CONTROLLER_MESSAGE, responses=())
    else:
        try:
            for tp, outcome in (await controller.alter_partition_reassignments(wanted)).items():
                outcomes[(tp[0], tp[1])] = (outcome.error, outcome.message)
        except KafkaError as exc:
            top_error, top_message = exc.code, exc.message
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition) in sorted(wanted):
        error, message = outcomes.get((topic, partition), (top_error, top_message or None))
        by_topic.setdefault(topic, []).append(
            part_cls(partition_index=partition, error_code=error, error_message=message)
        )
    return fit(
        ctx.response_class, throttle_time=NO_THROTTLE, error_code=top_error, error_message=top_message,
        responses=tuple(topic_cls(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
    )
