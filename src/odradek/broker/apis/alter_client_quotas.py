"""AlterClientQuotas (key 49), versions 0-1 (KIP-546).

Sets and removes quotas of ``user``, ``client-id`` and ``(user, client-id)`` entities, a null name meaning the
default entity, as Kafka's ZkAdminManager does: the entity's znode under ``/config`` is read, each op applied in
order, the result written and a change notification created, which every broker (this one included) applies
without a restart. Each entry succeeds or fails alone; ``validate_only`` checks without writing.

Refused with INVALID_REQUEST, with Kafka's messages: an empty entity, an unknown entity type, an empty name, a key
that is not a quota (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``), and a fractional value for a LONG key (the byte rates). Kafka lets a remove op name
any key of a user's znode, SCRAM credentials included; odradek refuses that too, so a quota request can never drop
a credential. ``ip`` entities (connection rates) are not supported: INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.quotas import CLIENT_ID, DEFAULT, IP, QUOTA_KEYS, USER, QuotaEntity, quota_text, sanitize
from odradek.errors import ErrorCode, KafkaError

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1


def parse_entity(parts: Sequence[Any]) -> QuotaEntity:
    """The entity of a request entry (later parts of the same type win, as Kafka's map of them does)."""
    if not parts:
        raise KafkaError(ErrorCode.invalid_request, "Invalid empty client quota entity")
    names: dict[str, str] = {}
    for part in parts:
        kind, name = part.entity_type, part.entity_name
        if kind not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.invalid_request, f"Unhandled client quota entity type: {kind}")
        if name == "":
            raise KafkaError(ErrorCode.invalid_request, f"Empty {kind} not supported")
        names[kind] = DEFAULT if name is None else sanitize(name)
    if IP in names:
        if len(names) > 1:
            raise KafkaError(
                ErrorCode.invalid_request,
                "Invalid quota entity combination, IP entity should not be used with user/client ID entity.",
            )
        raise KafkaError(ErrorCode.invalid_request, "ip quotas (connection_creation_rate) are not supported by odradek")
    return QuotaEntity(names.get(USER), names.get(CLIENT_ID))


def apply_ops(current: dict[str, str], ops: Sequence[Any]) -> dict[str, str]:
    """The entity's quota keys after ``ops`` (KafkaError on the first invalid one, nothing applied)."""
    out = dict(current)
    for op in ops:
        if op.key not in QUOTA_KEYS:
            raise KafkaError(ErrorCode.invalid_request, f"Invalid configuration key {op.key}")
        if op.remove:
            out.pop(op.key, None)
            continue
        try:
            out[op.key] = quota_text(op.key, float(op.value))
        except ValueError as exc:
            raise KafkaError(ErrorCode.invalid_request, str(exc)) from None
    return out


async def handle(ctx: RequestContext, request: Any) -> Any:
    entry_cls = nested(ctx, "EntryData")
    entity_cls = nested(ctx, "EntityData")
    results = []
    allowed = authz.allowed(ctx, authz.Operation.ALTER_CONFIGS, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME)
    for entry in request.entries:
        error, message = ErrorCode.none, None
        try:
            if not allowed:  # KafkaApis: AlterConfigs on the Cluster, else every entry refused with Kafka's message
                raise KafkaError(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
            entity = parse_entity(entry.entity)
            apply_ops({}, entry.ops)  # every op checked before anything is read or written
            if not request.validate_only:
                await ctx.services.quotas.alter(entity, partial(apply_ops, ops=entry.ops))
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(entry_cls(
            error_code=error, error_message=message,
            entity=tuple(entity_cls(entity_type=p.entity_type, entity_name=p.entity_name) for p in entry.entity),
        ))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, entries=tuple(results))
