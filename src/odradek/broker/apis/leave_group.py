"""LeaveGroup (key 13), versions 0-5: members leave at once instead of waiting out their session.

v0-v2 name one member; its error is the response's error. v3+ batch members, each identified by member id or, for
static members, by group.instance.id (KIP-345), with one error per member. With an authorizer the group needs READ,
else GROUP_AUTHORIZATION_FAILED (and no member leaves). Classic members of a
KIP-848 consumer group leave it the same way (the group epoch moves).
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode

API_KEY = 13
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authz.allowed(ctx, authz.Operation.READ, authz.ResourceType.GROUP, request.group_id):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE,
                   error_code=ErrorCode.group_authorization_failed, members=())
    if ctx.api_version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    error, member_errors = await ctx.services.groups.leave_group(request.group_id, leaving)
    if ctx.api_version < 3:
        if error is ErrorCode.none and member_errors:
            error = member_errors[0]
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=error)
    member = nested(ctx, "MemberResponse")
    return fit(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=error,
        members=tuple(
            member(member_id=mid, group_instance_id=instance_id, error_code=member_error)
            for (mid, instance_id), member_error in zip(leaving, member_errors, strict=False)
        ),
    )
