"""ConsumerGroupHeartbeat (key 68), versions 0-1: KIP-848's consumer protocol, one request for join, heartbeat,
subscription change and leave.

Member epoch 0 joins (rebalance timeout, subscription and owned partitions required, else INVALID_REQUEST), -1
leaves, -2 leaves as a static member; any other epoch must be the member's current one (FENCED_MEMBER_EPOCH, or
UNKNOWN_MEMBER_ID for a member the group does not hold). The broker computes the target assignment with the
server-side assignor (``uniform`` or ``range``; any other name is UNSUPPORTED_ASSIGNOR) and moves each member
towards it, revoking before assigning. v1 adds ``subscribed_topic_regex``, resolved against the broker's topics on
every heartbeat, so a new matching topic joins the subscription. v0 lets the broker generate the member id.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.group.consumer_group import HeartbeatRequest, Partitions, TopicsSnapshot
from odradek.errors import ErrorCode

API_KEY = 68
MIN_VERSION = 0
MAX_VERSION = 1


def topics_snapshot(ctx: RequestContext) -> TopicsSnapshot:
    return {name: (meta.topic_id, len(meta.partitions)) for name, meta in ctx.services.metadata.topics.items()}


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authz.allowed(ctx, authz.Operation.READ, authz.ResourceType.GROUP, request.group_id):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE,
                   error_code=ErrorCode.group_authorization_failed, error_message=None, member_id=None,
                   member_epoch=0, heartbeat_interval=datetime.timedelta(0), assignment=None)
    topics = topics_snapshot(ctx)
    names_by_id = {tid: name for name, (tid, _) in topics.items()}
    owned: Partitions | None = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            name = names_by_id.get(tp.topic_id)
            if name is not None:
                owned[name] = frozenset(int(p) for p in tp.partitions)
    result = await ctx.services.groups.consumer_heartbeat(
        HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=int(request.member_epoch),
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=int(request.rebalance_timeout.total_seconds() * 1000),
            subscribed_names=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
            subscribed_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor,
            owned=owned,
            client_id=ctx.client_id or "",
            client_host=f"/{ctx.client_host}",  # Java's InetAddress.toString, as Kafka stores and describes it
        ),
        topics,
    )
    assignment = None
    if result.assignment is not None:
        tp_cls = nested(ctx, "TopicPartitions")
        assignment = nested(ctx, "Assignment")(
            topic_partitions=tuple(
                tp_cls(topic_id=topics[name][0], partitions=tuple(sorted(ps)))
                for name, ps in sorted(result.assignment.items())
                if name in topics
            )
        )
    # an error answer leaves the interval at its default, 0, as Kafka's error responses do
    interval = ctx.services.groups.config.consumer_heartbeat_interval_ms if result.error == ErrorCode.none else 0
    return fit(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=interval),
        assignment=assignment,
    )
