"""DescribeUserScramCredentials (key 50), version 0 (KIP-554).

Which SCRAM mechanisms each user has a credential for, and with how many iterations (never the salt or keys), read
from ``/config/users/<user>`` as Kafka's ZkAdminManager reads it. A null or empty list describes every user that
has a credential, sorted; a named user without one gets RESOURCE_NOT_FOUND, an empty name RESOURCE_NOT_FOUND
("Username must not be empty"), a name given twice DUPLICATE_RESOURCE; each such user is answered once, in request
order. A store that cannot be read answers the request-level error.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.coordination import CoordinationError
from odradek.errors import ErrorCode, KafkaError
from odradek.security.scram import MECHANISM_TYPES, ScramFormatError
from odradek.security.scram_store import describe_credentials

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: Any) -> Any:
    result_cls = nested(ctx, "DescribeUserScramCredentialsResult")
    info_cls = nested(ctx, "CredentialInfo")
    names = [u.name for u in request.users] if request.users else None
    if not authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        # KafkaApis: Describe on the Cluster, else its error response: one refusal per user asked for, with the
        # user left empty as Kafka's getErrorResponse leaves it (Kafka fails on a null list; odradek lists none)
        refused = ErrorCode.cluster_authorization_failed
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=refused, error_message=None,
                   results=tuple(result_cls(user="", error_code=refused, error_message=None, credential_infos=())
                                 for _ in names or ()))
    results: dict[str, Any] = {}
    wanted: list[str] | None = None
    if names is not None:
        for name in names:
            if not name:
                results[name] = result_cls(user=name, error_code=ErrorCode.resource_not_found,
                                           error_message="Username must not be empty", credential_infos=())
            elif names.count(name) > 1:
                results[name] = result_cls(
                    user=name, error_code=ErrorCode.duplicate_resource, credential_infos=(),
                    error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: "
                                  f"{name}")
        wanted = [n for n in dict.fromkeys(names) if n not in results]
    try:
        found = await describe_credentials(ctx.services.topics.membership.current(), wanted)
    except (CoordinationError, KafkaError, ScramFormatError) as exc:
        log.warning("cannot describe SCRAM credentials: %s", exc)
        code = exc.code if isinstance(exc, KafkaError) else ErrorCode.unknown_server_error
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=code,
                   error_message="Error processing describe user SCRAM credential configs request", results=())
    for user, creds in found.items():
        infos = tuple(info_cls(mechanism=MECHANISM_TYPES[m], iterations=i)
                      for m, i in sorted(creds.items(), key=lambda kv: MECHANISM_TYPES[kv[0]]))
        results[user] = result_cls(user=user, error_code=ErrorCode.none, error_message=None, credential_infos=infos)
    for user in wanted or ():
        if user not in results:
            results[user] = result_cls(
                user=user, error_code=ErrorCode.resource_not_found, credential_infos=(),
                error_message=f"Attempt to describe a user credential that does not exist: {user}")
    order = list(dict.fromkeys(names)) if names is not None else sorted(results)
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
               error_message="", results=tuple(results[u] for u in order))
