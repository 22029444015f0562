"""CreateAcls (key 30), versions 1-3 (kio has no schema for the deprecated v0).

Needs ALTER on the Cluster (else every creation gets CLUSTER_AUTHORIZATION_FAILED); with no authorizer configured
every creation gets SECURITY_DISABLED, as Kafka answers. Each ACL is checked (INVALID_REQUEST for an ANY or
MATCH pattern, ANY operation or permission, an empty name, a Cluster resource not named ``kafka-cluster``, a ``/``
in the name, a principal not of the form ``Type:name``), then stored in Kafka's znodes with compare-and-set, one
write per resource pattern, announced to the other brokers; creating an ACL that exists already succeeds. An
UNKNOWN code closes the connection, as Kafka refuses to parse such a request.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.framing import FrameError
from odradek.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    from_code,
)

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3


def _known(name: str, *codes: tuple[type[Any], int]) -> list[Any]:
    values = [from_code(cls, code) for cls, code in codes]
    if any(int(v) == 0 for v in values):
        raise FrameError(f"{name} contains UNKNOWN elements: {[c for _, c in codes]}")
    return values


def binding_of(creation: Any) -> AclBinding:
    rtype, ptype, op, perm = _known(
        "CreateAcls", (ResourceType, creation.resource_type), (PatternType, creation.resource_pattern_type),
        (Operation, creation.operation), (Permission, creation.permission_type))
    return AclBinding(ResourcePattern(rtype, creation.resource_name, ptype),
                      AccessControlEntry(creation.principal, creation.host, op, perm))


def filter_of(item: Any) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter as Kafka's AclBindingFilter."""
    rtype, ptype, op, perm = _known(
        "ACL filter", (ResourceType, item.resource_type_filter), (PatternType, item.pattern_type_filter),
        (Operation, item.operation), (Permission, item.permission_type))
    return AclBindingFilter(rtype, item.resource_name_filter, ptype, item.principal_filter, item.host_filter, op,
                            perm)


async def handle(ctx: RequestContext, request: Any) -> Any:
    bindings = [binding_of(c) for c in request.creations]
    result = nested(ctx, "AclCreationResult")
    try:
        authz.require_cluster(ctx, Operation.ALTER)
        authorizer = ctx.services.authorizer
        if authorizer is None:
            raise KafkaError(ErrorCode.security_disabled, "No Authorizer is configured.")
    except KafkaError as exc:
        return fit(ctx.response_class, throttle_time=NO_THROTTLE,
                   results=tuple(result(error_code=exc.code, error_message=exc.message) for _ in bindings))
    outcomes = await authorizer.create_acls(bindings)
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, results=tuple(
        result(error_code=ErrorCode.none, error_message="") if err is None  # Kafka's default: empty, not null
        else result(error_code=err.code, error_message=err.message)
        for err in outcomes))
