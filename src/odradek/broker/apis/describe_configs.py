"""DescribeConfigs (key 32), versions 1-4.

Topic resources (type 2) list every topic config with its effective value and source: DYNAMIC_TOPIC_CONFIG for
the topic's overrides, STATIC_BROKER_CONFIG when the broker's synonym sets it, DEFAULT_CONFIG otherwise; with
``include_synonyms`` the chain behind the value; v3+ its type, and documentation when asked. Broker resources
(type 4, the broker id as name) list the broker's static configuration. A requested subset of keys is honoured.
Unknown topics get UNKNOWN_TOPIC_OR_PARTITION; another broker's id or an unsupported resource type, INVALID_REQUEST.
With an authorizer, a topic needs DESCRIBE_CONFIGS on it (else TOPIC_AUTHORIZATION_FAILED), a broker DESCRIBE_CONFIGS
on the Cluster (else CLUSTER_AUTHORIZATION_FAILED), as Kafka's ConfigHelper checks them.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.config import BROKER_DEFAULTS, KAFKA_CONFIG_TYPES, SENSITIVE
from odradek.broker.topic_config import describe, validate_overrides
from odradek.errors import INVALID_REQUEST_MESSAGE, ErrorCode, KafkaError

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

TOPIC, BROKER = 2, 4
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
_TYPES = {bool: 1, str: 2, int: 5}
"""Kafka's ConfigDef.Type ids by Python kind; :data:`KAFKA_CONFIG_TYPES` names the configs they do not fit."""
_TYPE_IDS = {"INT": 3, "SHORT": 4, "LIST": 7}
PASSWORD_TYPE = 9  # Kafka's ConfigType.PASSWORD: keys and passwords are never sent back


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    result_cls = nested(ctx, "DescribeConfigsResult")
    entry_cls = nested(ctx, "DescribeConfigsResourceResult")
    synonym_cls = nested(ctx, "DescribeConfigsSynonym")
    results = []
    for res in request.resources:
        # Kafka's ConfigHelper leaves the message at its default ("") on success and for an unknown topic
        error, configs = ErrorCode.none, ()
        message: str | None = ""
        keys = set(res.configuration_keys) if res.configuration_keys else None
        try:
            refusal = authz.config_refusal(ctx, authz.Operation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
            if refusal is not None:  # answered with Kafka's message for the error
                raise KafkaError(refusal.code, authz.REFUSAL_MESSAGE[refusal.code])
            if res.resource_type == TOPIC:
                record = await services.topics.topic_record(res.resource_name)
                if record is None:
                    raise KafkaError(ErrorCode.unknown_topic_or_partition, "")
                entries = [
                    entry_cls(
                        name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                        is_sensitive=e.sensitive,
                        synonyms=tuple(synonym_cls(name=n, value=v, source=s) for n, v, s in e.synonyms)
                        if request.include_synonyms else (),
                        config_type=e.type,
                        documentation=e.doc if getattr(request, "include_documentation", False) else None,
                    )
                    for e in describe(
                        validate_overrides(record.configs), services.config.topic_defaults(),
                        sorted(keys) if keys else None,
                    )
                ]
                configs = tuple(entries)
            elif res.resource_type == BROKER:
                if res.resource_name not in ("", str(services.broker_id)):
                    raise KafkaError(ErrorCode.invalid_request, f"Unexpected broker id, expected "
                                     f"{services.broker_id} or empty string, but received {res.resource_name}")
                entries = []
                # the empty name is the cluster-wide default resource: Kafka lists its dynamic default configs
                # there, and odradek has none (every broker config is static)
                static = sorted(BROKER_DEFAULTS.items()) if res.resource_name else []
                for name, (kind, default) in static:
                    if keys is not None and name not in keys:
                        continue
                    value = services.config[name]
                    text = None if value is None else (str(value).lower() if kind is bool else str(value))
                    # Kafka: STATIC_BROKER_CONFIG for a name server.properties (here: the settings given) sets,
                    # even to its default's value
                    set_here = name in services.config.explicit or value != default
                    source = STATIC_BROKER_CONFIG if set_here else DEFAULT_CONFIG
                    sensitive = name in SENSITIVE
                    entries.append(
                        entry_cls(
                            name=name, value=None if sensitive else text, read_only=True, config_source=source,
                            is_sensitive=sensitive, synonyms=(),
                            config_type=PASSWORD_TYPE if sensitive else _TYPE_IDS.get(
                                KAFKA_CONFIG_TYPES.get(name, ""), _TYPES.get(kind, 2)),
                            documentation=None,
                        )
                    )
                configs = tuple(entries)
            else:
                raise KafkaError(ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE)
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(
            result_cls(
                error_code=error, error_message=message, resource_type=res.resource_type,
                resource_name=res.resource_name, configs=configs,
            )
        )
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, results=tuple(results))
