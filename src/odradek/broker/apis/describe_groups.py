"""DescribeGroups (key 15), versions 0-6: state, protocol and members of groups.

Member metadata and assignments are included only while the group is Stable, as Kafka does. An unknown group
is reported as Dead with no members and no error up to v5; v6 answers GROUP_ID_NOT_FOUND for it (KIP-1043).
With
``include_authorized_operations`` (v3+) the answer lists which of READ, DESCRIBE and DELETE the principal may do
(all of them without an authorizer). With an authorizer a group needs DESCRIBE, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 6

_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # AclOperation READ, DELETE, DESCRIBE
_OPERATIONS_NOT_REQUESTED = -(2**31)


async def handle(ctx: RequestContext, request: Any) -> Any:
    group_cls = nested(ctx, "DescribedGroup")
    member_cls = nested(ctx, "DescribedGroupMember")
    operations = (
        _GROUP_OPERATIONS if getattr(request, "include_authorized_operations", False) else _OPERATIONS_NOT_REQUESTED
    )
    described = []
    for group_id in request.groups:
        if not authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.GROUP, group_id):
            described.append(group_cls(error_code=ErrorCode.group_authorization_failed, error_message=None,
                                       group_id=group_id, group_state="", protocol_type="", protocol_data="",
                                       members=(), authorized_operations=_OPERATIONS_NOT_REQUESTED))
            continue
        error, summary = ctx.services.groups.describe_group(group_id)
        message = None
        if summary is None:
            state, protocol_type, protocol, members = "Dead", "", "", ()
            if ctx.api_version >= 6:
                error, message = ErrorCode.group_id_not_found, f"group {group_id} not found"
        else:
            state, protocol_type, protocol = summary.state, summary.protocol_type, summary.protocol
            members = tuple(
                member_cls(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                for m in summary.members
            )
        described.append(
            group_cls(
                error_code=error,
                error_message=message,
                group_id=group_id,
                group_state=state,
                protocol_type=protocol_type,
                protocol_data=protocol,
                members=members,
                authorized_operations=_operations(ctx, group_id, operations),
            )
        )
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, groups=tuple(described))


def _operations(ctx: RequestContext, group_id: str, requested: int) -> int:
    if requested == _OPERATIONS_NOT_REQUESTED or ctx.services.authorizer is None:
        return requested
    return authz.authorized_operations(ctx, authz.ResourceType.GROUP, group_id,
                                       (authz.Operation.READ, authz.Operation.DELETE, authz.Operation.DESCRIBE))
