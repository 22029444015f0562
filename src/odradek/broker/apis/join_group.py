"""JoinGroup (key 11), versions 0-9: the first half of a classic-protocol rebalance.

The answer waits until the group's rebalance completes (initial delay, every member rejoined, or the rebalance
timeout), as in Kafka. v0 has no rebalance timeout, so the session timeout serves as one. From v4 a member
without an id first gets MEMBER_ID_REQUIRED with its id (KIP-394). v5 adds group.instance.id (static
membership), v7 the protocol type in the answer, v9 skip_assignment for a static leader that rejoins a stable
group (KIP-814). With an authorizer the group needs READ, else GROUP_AUTHORIZATION_FAILED.

In a KIP-848 consumer group (one a consumer-protocol member upgraded, or one it created) the consumer group
serves the classic member: its subscription comes from the ConsumerProtocol metadata, the answer is immediate,
with the member epoch as generation and no leader, and a rejoin reconciles it against the partitions it owns.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.group.requests import JoinRequest
from odradek.errors import ErrorCode

API_KEY = 11
MIN_VERSION = 0
MAX_VERSION = 9

_MS = datetime.timedelta(milliseconds=1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    if not authz.allowed(ctx, authz.Operation.READ, authz.ResourceType.GROUP, request.group_id):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE,
                   error_code=ErrorCode.group_authorization_failed, generation_id=-1, protocol_type=None,
                   protocol_name=None if version >= 7 else "", leader="", skip_assignment=False, member_id="",
                   members=())
    session_timeout_ms = request.session_timeout // _MS
    rebalance_timeout_ms = request.rebalance_timeout // _MS if version >= 1 else session_timeout_ms
    result = await ctx.services.groups.join_group(JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}",  # Java's InetAddress.toString, as Kafka stores and describes it
        rebalance_timeout_ms=rebalance_timeout_ms,
        session_timeout_ms=session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols],
        require_known_member_id=version >= 4,
        supports_skip_assignment=version >= 9,
    ))
    member = nested(ctx, "JoinGroupResponseMember")
    # Before v7 the protocol name is not nullable: Kafka sends "" when there is none.
    protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return fit(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            member(member_id=mid, group_instance_id=instance_id, metadata=metadata)
            for mid, instance_id, metadata in result.members
        ),
    )
