"""AlterConfigs (key 33), versions 0-2: the legacy, whole-replacement form that IncrementalAlterConfigs superseded.

For a topic the request's entries become its complete override set: any override the request leaves out goes back
to its default, as Kafka's legacy AlterConfigs does. The set is validated as a whole (INVALID_CONFIG for an unknown
name or a bad value, INVALID_REQUEST for a null value) and applied only if all of it is valid; ``validate_only``
stops there. Unknown topics: UNKNOWN_TOPIC_OR_PARTITION. For a broker resource (KIP-226: "" the cluster
default, the id this broker) the entries become the entity's whole dynamic config, judged as IncrementalAlterConfigs
judges it (an empty set clears it). Other resource types: INVALID_REQUEST. With an authorizer, a topic needs
ALTER_CONFIGS on it (else TOPIC_AUTHORIZATION_FAILED), a broker ALTER_CONFIGS on the Cluster (else
CLUSTER_AUTHORIZATION_FAILED), as Kafka checks them.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.apis.incremental_alter_configs import alter_broker, alter_topic, preprocess
from odradek.broker.topic_config import validate_overrides
from odradek.errors import ErrorCode, KafkaError

API_KEY = 33
MIN_VERSION = 0
MAX_VERSION = 2

TOPIC, BROKER = 2, 4


def replacement(current: dict[str, str], configs: Any) -> dict[str, str]:
    """The new override map (``configs`` replace ``current`` whole), or KafkaError for the first bad entry."""
    out: dict[str, str] = {}
    for entry in configs:
        if entry.value is None:
            raise KafkaError(ErrorCode.invalid_request, f"Null value not supported for : {entry.name}")
        out[entry.name] = entry.value
    validate_overrides(out)
    return out


def _whole(new: dict[str, str], _current: dict[str, str]) -> dict[str, str]:
    """A broker entity's new config: the request's entries, whatever was stored."""
    return dict(new)


async def handle(ctx: RequestContext, request: Any) -> Any:
    result_cls = nested(ctx, "AlterConfigsResourceResponse")
    results = []
    refused = preprocess(request.resources, lambda c: c.value is None)
    for i, res in enumerate(request.resources):
        error, message = ErrorCode.none, None
        try:
            if i in refused:
                raise refused[i]
            whole = partial(_whole, {c.name: c.value for c in res.configs})
            if res.resource_type == BROKER:
                await alter_broker(ctx, res.resource_name, whole, request.validate_only)
            refusal = authz.config_refusal(ctx, authz.Operation.ALTER_CONFIGS, res.resource_type, res.resource_name)
            if refusal is not None:
                raise refusal
            if res.resource_type == BROKER:
                await alter_broker(ctx, res.resource_name, whole, request.validate_only, checked=True)
            elif res.resource_type != TOPIC:
                raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type {res.resource_type}")
            else:
                await alter_topic(ctx, res.resource_name, partial(replacement, configs=res.configs),
                                  request.validate_only)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(result_cls(error_code=error, error_message=message, resource_type=res.resource_type,
                                  resource_name=res.resource_name))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, responses=tuple(results))
