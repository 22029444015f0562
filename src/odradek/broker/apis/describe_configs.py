"""DescribeConfigs (key 32), versions 1-4.

Topic resources (type 2) list every topic config with its effective value and source: DYNAMIC_TOPIC_CONFIG for
the topic's overrides, then the broker's synonym where this broker's dynamic config, the dynamic cluster default or
its static settings set it (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG),
DEFAULT_CONFIG otherwise; with ``include_synonyms`` the chain behind the value; v3+ its type, and documentation when
asked. A broker resource (type 4, the broker id as name) lists every Kafka broker config, valued and sourced level by
level (:func:`odradek.broker.dynamic_config.describe_broker`), ``read_only`` false for the dynamically updatable
names; the empty name, the cluster default, lists the dynamic defaults alone. A requested subset of keys is honoured.
Unknown topics get UNKNOWN_TOPIC_OR_PARTITION; another broker's id or an unsupported resource type, INVALID_REQUEST.
With an authorizer, a topic needs DESCRIBE_CONFIGS on it (else TOPIC_AUTHORIZATION_FAILED), a broker DESCRIBE_CONFIGS
on the Cluster (else CLUSTER_AUTHORIZATION_FAILED), as Kafka's ConfigHelper checks them.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.config import BROKER_DEFAULTS, KAFKA_CONFIG_TYPES, SENSITIVE, BrokerConfig
from odradek.broker.dynamic_config import BrokerEntry, describe_broker
from odradek.broker.topic_config import describe, validate_overrides
from odradek.errors import INVALID_REQUEST_MESSAGE, ErrorCode, KafkaError

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4

TOPIC, BROKER = 2, 4
_TYPES = {bool: 1, str: 2, int: 5}
"""Kafka's ConfigDef.Type ids by Python kind; :data:`KAFKA_CONFIG_TYPES` names the configs they do not fit."""
_TYPE_IDS = {"INT": 3, "SHORT": 4, "LIST": 7}
PASSWORD_TYPE = 9  # Kafka's ConfigType.PASSWORD: keys and passwords are never sent back


def _broker_entries(config: BrokerConfig, per_broker: bool, names: list[str] | None) -> list[BrokerEntry]:
    """A broker resource's rows; the settings odradek was started with are its STATIC_BROKER_CONFIG level (a value
    given in code counts as set even when it is not among the ``explicit`` names)."""
    static = config.static_properties()
    for name, (_kind, default) in BROKER_DEFAULTS.items():
        value = config.static.get(name)
        if value is not None and value != default:
            static.setdefault(name, str(value).lower() if isinstance(value, bool) else str(value))
    return describe_broker(
        per_broker=per_broker, dynamic_broker=config.dynamic_broker, dynamic_default=config.dynamic_default,
        static=static, own_types=_OWN_TYPES,
        own_defaults={n: None if d is None else (str(d).lower() if kind is bool else str(d))
                      for n, (kind, d) in BROKER_DEFAULTS.items()},
        names=names,
    )


_OWN_TYPES = {name: (PASSWORD_TYPE if name in SENSITIVE else _TYPE_IDS.get(KAFKA_CONFIG_TYPES.get(name, ""),
                                                                          _TYPES.get(kind, 2)))
              for name, (kind, _default) in BROKER_DEFAULTS.items()}
"""The types of odradek's configs that Kafka's catalogue lacks, as odradek reported them before it had one."""


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
                        validate_overrides(record.configs), services.config.topic_default_levels(),
                        sorted(keys) if keys else None,
                    )
                ]
                configs = tuple(entries)
            elif res.resource_type == BROKER:
                if res.resource_name not in ("", str(services.broker_id)):
                    raise KafkaError(ErrorCode.invalid_request, f"Unexpected broker id, expected "
                                     f"{services.broker_id} or empty string, but received {res.resource_name}")
                configs = tuple(
                    entry_cls(
                        name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                        is_sensitive=e.sensitive,
                        synonyms=tuple(synonym_cls(name=n, value=v, source=s) for n, v, s in e.synonyms)
                        if request.include_synonyms else (),
                        config_type=e.type, documentation=None,
                    )
                    for e in _broker_entries(services.config, bool(res.resource_name),
                                             None if keys is None else list(res.configuration_keys))
                )
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
