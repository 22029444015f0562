"""DescribeAcls (key 29), versions 1-3 (kio has no schema for the deprecated v0).

Needs DESCRIBE on the Cluster (else CLUSTER_AUTHORIZATION_FAILED); with no authorizer configured the answer is
SECURITY_DISABLED, as Kafka's. Otherwise every ACL matching the filter, grouped by resource pattern. The filter
follows Kafka's ``AclBindingFilter``: a null name, principal or host and the ANY codes match anything; pattern type
MATCH finds the ACLs that apply to the named resource (its literal, the ``*`` literal and prefixes of the name).
A filter carrying an UNKNOWN code is a malformed request: the connection is closed, as Kafka closes it.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.apis.create_acls import filter_of
from odradek.errors import ErrorCode, KafkaError
from odradek.security.acl import AclBinding, ResourcePattern

API_KEY = 29
MIN_VERSION = 1
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    flt = filter_of(request)
    try:
        authz.require_cluster(ctx, authz.Operation.DESCRIBE)
    except KafkaError as exc:
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=exc.code, error_message=exc.message,
                   resources=())
    authorizer = ctx.services.authorizer
    if authorizer is None:
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.security_disabled,
                   error_message="No Authorizer is configured on the broker", resources=())
    by_pattern: dict[ResourcePattern, list[AclBinding]] = {}
    for binding in authorizer.acls(flt):
        by_pattern.setdefault(binding.pattern, []).append(binding)
    resource = nested(ctx, "DescribeAclsResource")
    description = nested(ctx, "AclDescription")
    resources = tuple(
        resource(resource_type=int(p.resource_type), resource_name=p.name, pattern_type=int(p.pattern_type),
                 acls=tuple(description(principal=b.entry.principal, host=b.entry.host,
                                        operation=int(b.entry.operation), permission_type=int(b.entry.permission))
                            for b in sorted(bindings, key=lambda b: (b.entry.principal, b.entry.host,
                                                                     b.entry.operation, b.entry.permission))))
        for p, bindings in sorted(by_pattern.items(), key=lambda kv: (kv[0].resource_type, kv[0].pattern_type,
                                                                      kv[0].name))
    )
    # Kafka answers an empty message, not null, when it found the ACLs
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message="",
               resources=resources)
