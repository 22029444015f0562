"""DeleteGroups (key 42), versions 0-2: remove Empty groups and their committed offsets.

Each group is answered on its own: NONE once its tombstones are committed to ``__consumer_offsets``,
NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND when unknown, NOT_COORDINATOR when another broker
coordinates it.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.broker.apis import RequestContext, fit, nested

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: RequestContext, request: Any) -> Any:
    names = list(dict.fromkeys(request.groups_names))
    results = await ctx.services.groups.delete_groups(names)
    result_cls = nested(ctx, "DeletableGroupResult")
    return fit(
        ctx.response_class,
        throttle_time=datetime.timedelta(0),
        results=tuple(result_cls(group_id=name, error_code=results[name]) for name in names),
    )
