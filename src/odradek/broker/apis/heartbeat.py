"""Heartbeat (key 12), versions 0-4: keeps a member's session alive and tells it when to rejoin.

REBALANCE_IN_PROGRESS while the group prepares a rebalance, ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID for a member that
missed one, FENCED_INSTANCE_ID for a replaced static member (v3+ carry group.instance.id). With an authorizer the
group needs READ, else GROUP_AUTHORIZATION_FAILED. A classic member of a KIP-848 consumer group gets
REBALANCE_IN_PROGRESS when the group epoch moved past it, when it must revoke, or when partitions it waits for were
released; it must then rejoin within its rebalance timeout.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit
from odradek.errors import ErrorCode

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authz.allowed(ctx, authz.Operation.READ, authz.ResourceType.GROUP, request.group_id):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE,
                   error_code=ErrorCode.group_authorization_failed)
    error = ctx.services.groups.heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=error)
