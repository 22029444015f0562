"""SyncGroup (key 14), versions 0-5: the second half of a rebalance, carrying the leader's assignment.

The leader's request stores the assignment in ``__consumer_offsets``; every member's answer (the leader's too) waits
until that write is committed, then carries that member's assignment. v3 adds group.instance.id; v5 the protocol
type and name, which must match the group's (else INCONSISTENT_GROUP_PROTOCOL). With an authorizer the group needs
READ, else GROUP_AUTHORIZATION_FAILED. A classic member of a KIP-848
consumer group gets, at once, the partitions the server-side assignor gave it, in its protocol's version.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit
from odradek.errors import ErrorCode

API_KEY = 14
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authz.allowed(ctx, authz.Operation.READ, authz.ResourceType.GROUP, request.group_id):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE,
                   error_code=ErrorCode.group_authorization_failed, protocol_type=None, protocol_name=None,
                   assignment=b"")
    result = await ctx.services.groups.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={a.member_id: a.assignment for a in request.assignments},
    )
    return fit(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
