"""IncrementalAlterConfigs (key 44), versions 0-1.

Changes a topic's config overrides, or a broker's dynamic configs (KIP-226: the name "" is the cluster-wide default,
the broker's id that broker alone): SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) for
list-valued configs such as ``cleanup.policy``. The whole change for a resource is validated first and applied only
if every entry is valid, so a resource never ends half-altered; ``validate_only`` stops there. A topic's bad entry is
INVALID_CONFIG; a broker's is INVALID_REQUEST with Kafka's words (a name that cannot change dynamically, one that
can change only per broker, a bad value, another broker's id), as Kafka's ConfigAdminManager answers before it
authorizes. Unknown topics: UNKNOWN_TOPIC_OR_PARTITION. With an authorizer, a topic needs ALTER_CONFIGS on it (else
TOPIC_AUTHORIZATION_FAILED), a broker ALTER_CONFIGS on the Cluster (else CLUSTER_AUTHORIZATION_FAILED), a group on
the group, as Kafka checks them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from odradek.broker import authz
from odradek.broker import dynamic_config as dc
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.link.broker_configs import entity_path
from odradek.broker.topic_config import CONFIG_DEFS, ConfigType, validate_overrides
from odradek.errors import ErrorCode, KafkaError

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_operations(current: dict[str, str], ops: Any) -> dict[str, str]:
    """The new override map after ``ops``, or KafkaError(INVALID_CONFIG / INVALID_REQUEST)."""
    out = dict(current)
    for op in ops:
        if op.config_operation == SET:
            if op.value is None:
                raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for: {op.name}")
            out[op.name] = op.value
        elif op.config_operation == DELETE:
            out.pop(op.name, None)
        elif op.config_operation in (APPEND, SUBTRACT):
            known = CONFIG_DEFS.get(op.name)
            if known is None or known.type is not ConfigType.LIST:
                raise KafkaError(
                    ErrorCode.invalid_config, f"Config value append is not allowed for config key: {op.name}"
                )
            default = ",".join(known.default) if isinstance(known.default, tuple) else str(known.default)
            items = [v for v in out.get(op.name, default).split(",") if v]
            given = [v for v in (op.value or "").split(",") if v]
            if op.config_operation == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            out[op.name] = ",".join(items)
        else:
            raise KafkaError(ErrorCode.invalid_request, f"Unknown config operation {op.config_operation}")
    validate_overrides(out)
    return out


async def alter_topic(ctx: RequestContext, topic: str, change: Callable[[dict[str, str]], dict[str, str]],
                      validate_only: bool) -> None:
    """Replace a topic's overrides with ``change(current)`` unless ``validate_only`` (both AlterConfigs APIs);
    ``change`` raises KafkaError for an invalid set, so nothing is written half-valid."""
    record = await ctx.services.topics.topic_record(topic)
    if record is None:
        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{topic}' does not exist.")
    try:
        new = change(record.configs)
    except KafkaError as exc:
        if exc.code == ErrorCode.invalid_config and (exc.message or "").startswith("Invalid value "):
            # a value that does not parse (Kafka's ConfigException), named with its resource as Kafka's
            # ZkAdminManager.alterConfigs does
            raise KafkaError(exc.code, "Invalid config value for resource ConfigResource(type=TOPIC, "
                                       f"name='{topic}'): {exc.message}") from None
        raise
    if not validate_only:
        await ctx.services.topics.alter_topic_configs(topic, new)


def preprocess(resources: Any, null_refused: Callable[[Any], bool]) -> dict[int, KafkaError]:
    """Kafka's ConfigAdminManager.preprocess checks every resource of both AlterConfigs APIs meets before anything
    else (before authorization too): each resource once, each config name once per resource, no null value where
    ``null_refused``. The refusals by position in the request."""
    refused: dict[int, KafkaError] = {}
    seen: dict[tuple[int, str], int] = {}
    for i, res in enumerate(resources):
        key = (res.resource_type, res.resource_name)
        if key in seen:
            for j in (seen[key], i):
                refused[j] = KafkaError(ErrorCode.invalid_request, "Each resource must appear at most once.")
        seen[key] = i
    for i, res in enumerate(resources):
        if i in refused:
            continue
        names = [c.name for c in res.configs]
        if len(set(names)) != len(names):
            refused[i] = KafkaError(ErrorCode.invalid_request, "Error due to duplicate config keys")
            continue
        nulls = [c.name for c in res.configs if null_refused(c)]
        if nulls:
            refused[i] = KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {', '.join(nulls)}")
    return refused


async def alter_broker(ctx: RequestContext, name: str, change: Callable[[dict[str, str]], dict[str, str]],
                       validate_only: bool, *, checked: bool = False) -> None:
    """Replace a broker entity's dynamic config with ``change(current)`` (both AlterConfigs APIs), judged as Kafka
    judges it; written and announced unless ``validate_only``, and applied here at once (every other broker applies
    it from the change notification). With ``checked`` false it stops after the judgement: Kafka's preprocessing,
    which runs before authorization."""
    services = ctx.services
    entity = dc.entity_of(name, services.broker_id)
    per_broker = entity != dc.DEFAULT_ENTITY
    new = change(dc.usable(await services.broker_configs.read(entity), per_broker))
    dc.validate(new, per_broker)
    config = services.config
    if per_broker:
        layered = _layered(_layered(config.static_properties(), config.dynamic_default), new)
    else:
        layered = _layered(_layered(config.static_properties(), new), config.dynamic_broker)
    dc.check_reconfiguration(config.layered_properties(), layered)
    if not checked:
        return
    try:
        dc.check_passwords(new, per_broker)
    except KafkaError as exc:
        raise KafkaError(exc.code, "Invalid config value for resource ConfigResource(type=BROKER, "
                                   f"name='{name}'): {exc.message}") from None
    if not validate_only:
        await services.broker_configs.write(entity, new)
        await services.broker_configs.entity_changed(entity_path(entity))


def _layered(base: dict[str, str], layer: dict[str, str]) -> dict[str, str]:
    out = dict(base)
    dc.overlay(out, layer)
    return out


async def handle(ctx: RequestContext, request: Any) -> Any:
    result_cls = nested(ctx, "AlterConfigsResourceResponse")
    results = []
    refused = preprocess(request.resources, lambda c: c.config_operation != DELETE and c.value is None)
    for i, res in enumerate(request.resources):
        error, message = ErrorCode.none, None
        try:
            if i in refused:
                raise refused[i]
            broker_change = partial(dc.apply_operations,
                                    ops=[(c.name, c.config_operation, c.value) for c in res.configs])
            if res.resource_type == BROKER:
                await alter_broker(ctx, res.resource_name, broker_change, request.validate_only)
            refusal = authz.config_refusal(ctx, authz.Operation.ALTER_CONFIGS, res.resource_type, res.resource_name)
            if refusal is not None:
                raise refusal
            if res.resource_type == BROKER:
                await alter_broker(ctx, res.resource_name, broker_change, request.validate_only, checked=True)
            elif res.resource_type != TOPIC:
                raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}")
            else:
                await alter_topic(ctx, res.resource_name, partial(apply_operations, ops=res.configs),
                                  request.validate_only)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(
            result_cls(error_code=error, error_message=message, resource_type=res.resource_type,
                       resource_name=res.resource_name)
        )
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, responses=tuple(results))
