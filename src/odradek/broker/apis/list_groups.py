"""ListGroups (key 16), versions 0-5: the groups this broker coordinates.

Only groups of loaded ``__consumer_offsets`` partitions are listed (admin clients ask every broker and merge);
while a partition is still loading the error is COORDINATOR_LOAD_IN_PROGRESS with what is known so far. v4
adds a state filter (case-insensitive), v5 a type filter: "classic" groups and KIP-848 "consumer" groups.
With an authorizer, DESCRIBE on the Cluster lists every group, as Kafka does; otherwise only the groups the
principal may DESCRIBE are listed.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: Any) -> Any:
    error, groups = ctx.services.groups.list_groups(
        getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
    )
    if ctx.services.authorizer is not None and not authz.allowed(
            ctx, authz.Operation.DESCRIBE, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        visible = authz.authorized_names(ctx, authz.Operation.DESCRIBE, authz.ResourceType.GROUP,
                                         (g.group_id for g in groups), filtering=True)
        groups = [g for g in groups if g.group_id in visible]
    listed = nested(ctx, "ListedGroup")
    return fit(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=error,
        groups=tuple(
            listed(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type)
            for g in groups
        ),
    )
