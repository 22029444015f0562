"""IncrementalAlterConfigs (key 44), versions 0-1.

Changes a topic's config overrides: SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) for
list-valued configs such as ``cleanup.policy``. The whole change for a resource is validated first and applied only
if every entry is valid (INVALID_CONFIG otherwise), so a topic never ends half-altered; ``validate_only`` stops
there. Broker resources are static in odradek: INVALID_REQUEST. Unknown topics: UNKNOWN_TOPIC_OR_PARTITION. With an
authorizer, a topic needs ALTER_CONFIGS on it (else TOPIC_AUTHORIZATION_FAILED), a broker ALTER_CONFIGS on the
Cluster (else CLUSTER_AUTHORIZATION_FAILED), a group on the group, as Kafka checks them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
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


async def handle(ctx: RequestContext, request: Any) -> Any:
    result_cls = nested(ctx, "AlterConfigsResourceResponse")
    results = []
    for res in request.resources:
        error, message = ErrorCode.none, None
        try:
            refusal = authz.config_refusal(ctx, authz.Operation.ALTER_CONFIGS, res.resource_type, res.resource_name)
            if refusal is not None:
                raise refusal
            if res.resource_type == BROKER:
                raise KafkaError(ErrorCode.invalid_request, "broker configs are static in odradek")
            if res.resource_type != TOPIC:
                raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}")
            await alter_topic(ctx, res.resource_name, partial(apply_operations, ops=res.configs),
                              request.validate_only)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(
            result_cls(error_code=error, error_message=message, resource_type=res.resource_type,
                       resource_name=res.resource_name)
        )
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, responses=tuple(results))
