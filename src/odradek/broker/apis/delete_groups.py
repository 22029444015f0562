"""DeleteGroups (key 42), versions 0-2: remove Empty groups and their committed offsets.

Each group is answered on its own: NONE once its tombstones are committed to ``__consumer_offsets``,
NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND when unknown, NOT_COORDINATOR when another broker
coordinates it. With an authorizer each group needs DELETE, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    names = list(dict.fromkeys(request.groups_names))
    allowed = authz.authorized_names(ctx, authz.Operation.DELETE, authz.ResourceType.GROUP, names)
    results: dict[str, ErrorCode] = {n: ErrorCode.group_authorization_failed for n in names if n not in allowed}
    if len(results) < len(names):
        results.update(await ctx.services.groups.delete_groups([n for n in names if n in allowed]))
    result_cls = nested(ctx, "DeletableGroupResult")
    return fit(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        results=tuple(result_cls(group_id=name, error_code=results[name]) for name in names),
    )
