"""DescribeClientQuotas (key 48), versions 0-1 (KIP-546).

Lists the quota entities whose znodes hold quota keys, with their values, filtered as Kafka's ZkAdminManager filters
them. Each filter component names an entity type (``user``, ``client-id``) and matches an exact name (match type 0),
the default entity (1) or any named or default entity of that type (2); an entity must satisfy every component, and
with ``strict`` it may have no part the components do not name. Entity names are answered as clients gave them (not
sanitized), a default entity's name as null; only quota keys are listed, never a user's SCRAM credentials.

A duplicate or empty entity type, or ``ip`` together with ``user``/``client-id``, is INVALID_REQUEST; another entity
type is UNSUPPORTED_VERSION (Kafka's "Custom entity type ... not supported"); an unknown match type INVALID_REQUEST.
The error goes in the response's error code, with a null entry list. odradek stores no ``ip`` quotas (connection
rates), so a filter on ``ip`` alone finds none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.quotas import CLIENT_ID, DEFAULT, IP, USER, QuotaEntity, desanitize, quota_values, sanitize
from odradek.errors import ErrorCode, KafkaError

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1

EXACT, DEFAULT_MATCH, SPECIFIED = 0, 1, 2

_ANY = object()
"""A component that matches any named or default entity of its type (match type 2)."""


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    """The request's components, each as what its part of an entity must be: a sanitized name, DEFAULT or _ANY."""

    user: object = None
    client_id: object = None
    ip: bool = False
    strict: bool = False

    @classmethod
    def parse(cls, components: Sequence[Any], strict: bool) -> QuotaFilter:
        wanted: dict[str, object] = {}
        for component in components:
            kind = component.entity_type
            if kind == "":
                raise KafkaError(ErrorCode.invalid_request, "Unexpected empty filter component entity type")
            if kind not in (USER, CLIENT_ID, IP):
                raise KafkaError(ErrorCode.unsupported_version, f"Custom entity type '{kind}' not supported")
            if kind in wanted:
                name = "client" if kind == CLIENT_ID else kind
                raise KafkaError(ErrorCode.invalid_request, f"Duplicate {name} filter component entity type")
            if component.match_type == EXACT:
                if component.match is None:
                    raise KafkaError(ErrorCode.invalid_request, f"Exact match of {kind} needs a name")
                wanted[kind] = sanitize(component.match)
            elif component.match_type == DEFAULT_MATCH:
                wanted[kind] = DEFAULT
            elif component.match_type == SPECIFIED:
                wanted[kind] = _ANY
            else:
                raise KafkaError(ErrorCode.invalid_request, f"Unexpected match type: {component.match_type}")
        if IP in wanted and (USER in wanted or CLIENT_ID in wanted):
            raise KafkaError(
                ErrorCode.invalid_request,
                "Invalid entity filter component combination, IP filter component should not be used with user or "
                "clientId filter component.",
            )
        return cls(wanted.get(USER), wanted.get(CLIENT_ID), IP in wanted, strict)

    def matches(self, entity: QuotaEntity) -> bool:
        """ZkAdminManager's ``matches`` for both parts: a named component wants that part present (and equal,
        unless _ANY); an absent component wants the part absent under ``strict``, anything otherwise."""
        if self.ip:
            return False  # no ip entities are stored
        return self._part(self.user, entity.user) and self._part(self.client_id, entity.client_id)

    def _part(self, want: object, have: str | None) -> bool:
        if want is None:
            return have is None or not self.strict
        if have is None:
            return False
        return want is _ANY or want == have


def describe(configs: Mapping[QuotaEntity, Mapping[str, str]], quota_filter: QuotaFilter,
             ) -> list[tuple[QuotaEntity, dict[str, float]]]:
    """The entities the filter matches that hold quota keys, and those values (sorted by entity path)."""
    out = []
    for entity in sorted(configs, key=lambda e: e.path):
        values = quota_values(configs[entity])
        if values and quota_filter.matches(entity):
            out.append((entity, values))
    return out


def entity_parts(entity: QuotaEntity) -> list[tuple[str, str | None]]:
    """(entity type, name as clients name it) pairs; a default entity's name is null."""
    parts = []
    if entity.user is not None:
        parts.append((USER, None if entity.user == DEFAULT else desanitize(entity.user)))
    if entity.client_id is not None:
        parts.append((CLIENT_ID, None if entity.client_id == DEFAULT else desanitize(entity.client_id)))
    return parts


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authz.allowed(ctx, authz.Operation.DESCRIBE_CONFIGS, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        # KafkaApis: DescribeConfigs on the Cluster, else the request's error response (no message, no entries)
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
                   error_message=None, entries=None)
    try:
        quota_filter = QuotaFilter.parse(request.components, request.strict)
        found = describe(await ctx.services.quotas.all_configs(), quota_filter)
    except KafkaError as exc:
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=exc.code, error_message=exc.message,
                   entries=None)
    entry_cls = nested(ctx, "EntryData")
    entity_cls = nested(ctx, "EntityData")
    value_cls = nested(ctx, "ValueData")
    entries = tuple(
        entry_cls(
            entity=tuple(entity_cls(entity_type=t, entity_name=n) for t, n in entity_parts(entity)),
            values=tuple(value_cls(key=k, value=v) for k, v in sorted(values.items())),
        )
        for entity, values in found
    )
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message="",
               entries=entries)
