"""ConsumerGroupDescribe (key 69), versions 0-1: KIP-848 groups with each member's current and target assignment.

v1 adds each member's type (0 classic, 1 consumer: a classic member of a consumer group is one that joined with
JoinGroup, or came with its classic group when a consumer-protocol member upgraded it).

Per group: GROUP_ID_NOT_FOUND when no consumer-protocol group has that id (a classic group included, as Kafka
answers), NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as for other group APIs. With an authorizer a group needs
DESCRIBE, else GROUP_AUTHORIZATION_FAILED. Authorized operations (when asked for) are computed only with an
authorizer; without one the field keeps its "not requested" value.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.group.consumer_group import Partitions
from odradek.errors import ErrorCode

API_KEY = 69
MIN_VERSION = 0
MAX_VERSION = 1
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    topics = ctx.services.metadata.topics
    tp_cls = nested(ctx, "TopicPartitions")
    assignment_cls = nested(ctx, "Assignment")
    member_cls = nested(ctx, "Member")
    group_cls = nested(ctx, "DescribedGroup")

    def assignment(parts: Partitions) -> Any:
        return assignment_cls(
            topic_partitions=tuple(
                tp_cls(topic_id=topics[t].topic_id, topic_name=t, partitions=tuple(sorted(ps)))
                for t, ps in sorted(parts.items())
                if t in topics
            )
        )

    described = []
    for group_id in request.group_ids:
        error, group = ctx.services.groups.consumer_group(group_id)
        if not authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.GROUP, group_id):
            error, group = ErrorCode.group_authorization_failed, None
        if group is None:
            described.append(
                group_cls(
                    error_code=error,
                    error_message=f"Group {group_id} not found." if error == ErrorCode.group_id_not_found else None,
                    group_id=group_id,
                    group_state="",  # an error entry keeps the schema's defaults, as Kafka 4's does
                    group_epoch=0,
                    assignment_epoch=0,
                    assignor_name="",
                    members=(),
                )
            )
            continue
        described.append(
            group_cls(
                error_code=error,
                group_id=group_id,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.assignor_name,
                authorized_operations=_operations(ctx, request, group_id),
                members=tuple(
                    member_cls(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=m.subscribed_names,
                        subscribed_topic_regex=m.subscribed_regex or "",  # Kafka: "" when subscribed by name
                        assignment=assignment(m.assigned),
                        target_assignment=assignment(group.target.get(m.member_id, {})),
                        **typed,
                    )
                    for m in group.members.values()
                    for typed in [_member_type(ctx, m.classic is not None)]
                ),
            )
        )
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, groups=tuple(described))


GROUP_OPERATIONS = (authz.Operation.READ, authz.Operation.DESCRIBE, authz.Operation.DELETE,
                    authz.Operation.DESCRIBE_CONFIGS, authz.Operation.ALTER_CONFIGS)


def _operations(ctx: RequestContext, request: Any, group_id: str) -> int:
    """Kafka's group operations the principal has, when asked and an authorizer decides; else "not computed"."""
    if ctx.services.authorizer is None or not getattr(request, "include_authorized_operations", False):
        return -2147483648
    return authz.authorized_operations(ctx, authz.ResourceType.GROUP, group_id, GROUP_OPERATIONS)


def _member_type(ctx: RequestContext, classic: bool) -> dict[str, int]:
    return {"member_type": CLASSIC_MEMBER if classic else CONSUMER_MEMBER} if ctx.api_version >= 1 else {}
