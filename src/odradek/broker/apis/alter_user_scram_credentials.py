"""AlterUserScramCredentials (key 51), version 0 (KIP-554).

Sets and deletes users' SCRAM credentials in ``/config/users/<user>``, with Kafka's ZkAdminManager checks, per user:
an empty name is UNACCEPTABLE_CREDENTIAL ("Username must not be empty"), an unknown mechanism
UNSUPPORTED_SASL_MECHANISM, iterations outside 4096-16384 UNACCEPTABLE_CREDENTIAL ("Too few/many iterations"), the
same user and mechanism twice DUPLICATE_RESOURCE, deleting a credential that does not exist RESOURCE_NOT_FOUND; a
user with any of these is left unchanged. The client sends the salted password (never the password itself); the
broker derives the stored and server keys from it, as Kafka's ScramFormatter.generateCredential does. Only the
active controller answers (NOT_CONTROLLER otherwise), as in Kafka's ZooKeeper mode, where admin clients send this
request to the controller.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.coordination import CoordinationError
from odradek.errors import ErrorCode, KafkaError
from odradek.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramFormatError,
    credential_from_salted,
)
from odradek.security.scram_store import alter_credentials, read_user_config

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0

log = logging.getLogger(__name__)
BY_TYPE = {t: m for m, t in MECHANISM_TYPES.items()}


def _illegal(name: str, mechanism: int, iterations: int | None) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in BY_TYPE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    result_cls = nested(ctx, "AlterUserScramCredentialsResult")
    users = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    if not ctx.services.controller.is_active:
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, results=tuple(
            result_cls(user=u, error_code=ErrorCode.not_controller, error_message=None) for u in users))
    if not authz.allowed(ctx, authz.Operation.ALTER, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        # KafkaApis: Alter on the Cluster, else each user (sorted) refused, with no message
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, results=tuple(
            result_cls(user=u, error_code=ErrorCode.cluster_authorization_failed, error_message=None)
            for u in sorted(users)))
    errors: dict[str, tuple[ErrorCode, str | None]] = {}
    for d in request.deletions:
        bad = _illegal(d.name, int(d.mechanism), None)
        if bad is not None:
            errors[d.name] = bad
    for u in request.upsertions:
        bad = _illegal(u.name, int(u.mechanism), int(u.iterations))
        if bad is not None:
            errors[u.name] = bad
    pairs = [(d.name, int(d.mechanism)) for d in request.deletions if d.name not in errors]
    pairs += [(u.name, int(u.mechanism)) for u in request.upsertions if u.name not in errors]
    for pair in pairs:
        if pairs.count(pair) > 1:
            errors[pair[0]] = (ErrorCode.duplicate_resource,
                               "A user credential cannot be altered twice in the same request")
    session = ctx.services.topics.membership.current()
    for user in users:
        if user in errors:
            continue
        try:
            existing, _version = await read_user_config(session, user)
            deletions = [BY_TYPE[int(d.mechanism)] for d in request.deletions if d.name == user]
            if any(m not in existing for m in deletions):
                errors[user] = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
                continue
            upserts: dict[str, ScramCredential] = {}
            for u in request.upsertions:
                if u.name == user:
                    name = BY_TYPE[int(u.mechanism)]
                    upserts[name] = credential_from_salted(MECHANISMS[name], bytes(u.salted_password),
                                                           bytes(u.salt), int(u.iterations))
            await alter_credentials(session, user, upserts, deletions)
            log.info("altered SCRAM credentials of user %s (set %s, deleted %s)", user, sorted(upserts) or "none",
                     sorted(deletions) or "none")
        except (CoordinationError, KafkaError, ScramFormatError) as exc:
            log.warning("cannot alter SCRAM credentials of user %s: %s", user, exc)
            errors[user] = (exc.code if isinstance(exc, KafkaError) else ErrorCode.unknown_server_error, str(exc))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, results=tuple(
        result_cls(user=u, error_code=errors.get(u, (ErrorCode.none, None))[0],
                   error_message=errors.get(u, (ErrorCode.none, None))[1]) for u in users))
