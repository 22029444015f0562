"""DeleteAcls (key 31), versions 1-3 (kio has no schema for the deprecated v0).

Needs ALTER on the Cluster (else every filter gets CLUSTER_AUTHORIZATION_FAILED); with no authorizer configured
every filter gets SECURITY_DISABLED. Each filter (Kafka's ``AclBindingFilter``, as in DescribeAcls) deletes the
ACLs it matches among those this broker knows, plus, for a filter naming exactly one resource, whatever is stored
for it even if the change has not reached this broker yet (as AclAuthorizer does); each resource is rewritten with
compare-and-set and the change announced. The answer lists, per filter, the ACLs it deleted; an ACL that several
filters match is listed under the first. An UNKNOWN code closes the connection, as Kafka refuses to parse it.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.apis.create_acls import filter_of
from odradek.errors import ErrorCode, KafkaError

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    filters = [filter_of(f) for f in request.filters]
    filter_result = nested(ctx, "DeleteAclsFilterResult")
    matching = nested(ctx, "DeleteAclsMatchingAcl")
    try:
        authz.require_cluster(ctx, authz.Operation.ALTER)
        authorizer = ctx.services.authorizer
        if authorizer is None:
            raise KafkaError(ErrorCode.security_disabled, "No Authorizer is configured.")
    except KafkaError as exc:
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, filter_results=tuple(
            filter_result(error_code=exc.code, error_message=exc.message, matching_acls=()) for _ in filters))
    deleted = await authorizer.delete_acls(filters)
    results = []
    for bindings in deleted:
        acls = tuple(
            matching(error_code=ErrorCode.none if err is None else err.code,
                     error_message=None if err is None else err.message,
                     resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
                     pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal, host=b.entry.host,
                     operation=int(b.entry.operation), permission_type=int(b.entry.permission))
            for b, err in bindings)
        results.append(filter_result(error_code=ErrorCode.none, error_message=None, matching_acls=acls))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, filter_results=tuple(results))
