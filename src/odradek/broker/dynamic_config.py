"""Kafka's dynamic broker configs (KIP-226) as its ZooKeeper-mode brokers judge and layer them: pure, no I/O.

A broker's effective config is its static settings, overlaid by the cluster-wide dynamic defaults
(``/config/brokers/<default>``), overlaid by its own dynamic configs (``/config/brokers/<id>``); a dynamic value
replaces its synonyms too (``log.retention.hours`` set dynamically hides a static ``log.retention.ms``), as Kafka's
``DynamicBrokerConfig.overrideProps`` does. Which names may change at all, which only per broker, and the words of
each refusal are Kafka 3.9's (``DynamicBrokerConfig.validateConfigs``, ``DynamicConfig.Broker``). A name that is
no Kafka broker config at all is accepted and stored, as Kafka accepts custom names there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from odradek.broker.kafka_broker_configs import DYNAMIC_TYPES, KAFKA_DEFAULTS, NON_DYNAMIC
from odradek.broker.topic_config import CONFIG_DEFS, ConfigDef, ConfigSource, ConfigType
from odradek.errors import ErrorCode, KafkaError

DEFAULT_ENTITY = "<default>"
"""The cluster-wide default's entity name under ``/config/brokers`` (Kafka's ZooKeeperInternals.DEFAULT_STRING)."""

SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.truststore.certificates",
})
"""SslConfigs.RECONFIGURABLE_CONFIGS: dynamic only under a ``listener.name.<l>.`` prefix, and only per broker."""

LISTENER_CONFIGS = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map", "principal.builder.class",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.keystore.type",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth",
    "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds", "max.connections",
    "max.connection.creation.rate", "num.network.threads",
})
"""DynamicListenerConfig.ReconfigurableConfigs."""

CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
PER_BROKER = (SECURITY_CONFIGS | LISTENER_CONFIGS) - CLUSTER_LEVEL_LISTENER_CONFIGS
"""Names that can be set for one broker only, never as the cluster default (DynamicBrokerConfig.PerBrokerConfigs)."""

QUOTA_CONFIGS = {
    "leader.replication.throttled.rate": ConfigDef("leader.replication.throttled.rate", ConfigType.LONG,
                                                   2**63 - 1, "", "", minimum=0),
    "follower.replication.throttled.rate": ConfigDef("follower.replication.throttled.rate", ConfigType.LONG,
                                                     2**63 - 1, "", "", minimum=0),
    "replica.alter.log.dirs.io.max.bytes.per.second": ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second",
                                                                ConfigType.LONG, 2**63 - 1, "", "", minimum=0),
}
"""QuotaConfigs.brokerQuotaConfigs: dynamic-only names (no server.properties meaning), ``Long.MAX_VALUE`` unset."""

_LISTENER_PREFIX = "listener.name."
_TIME_SYNONYMS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_BROKER_TO_TOPIC = {d.broker_name: d for d in CONFIG_DEFS.values() if d.broker_name}


def _base_name(name: str) -> str | None:
    """``ssl.keystore.location`` for ``listener.name.ssl.ssl.keystore.location``; None for a name without prefix."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    _listener, dot, base = name[len(_LISTENER_PREFIX):].partition(".")
    return base if dot else None


def synonyms(name: str, *, listener_override: bool = True) -> list[str]:
    """Kafka's brokerConfigSynonyms: the names that set the same thing, most specific first."""
    if name == "log.flush.interval.ms":
        return list(_TIME_SYNONYMS[2])
    for group in _TIME_SYNONYMS:
        if name in group and name != "log.flush.scheduler.interval.ms":
            return list(group)
    base = _base_name(name)
    if base is not None and listener_override:
        mechanism = next((m for m in ("sasl.jaas.config", "sasl.login.callback.handler.class", "sasl.login.class",
                                      "sasl.server.callback.handler.class", "connections.max.reauth.ms")
                          if base.endswith(m)), None)
        return [name, mechanism or base]
    return [name]


def is_dynamic(name: str) -> bool:
    """Whether DescribeConfigs reports the name as updatable (Kafka's ``read_only`` false)."""
    return name in DYNAMIC_TYPES


def config_type(name: str) -> ConfigType | None:
    """Kafka's ConfigDef type of a broker config; None for a name KafkaConfig does not define."""
    if name in DYNAMIC_TYPES:
        return DYNAMIC_TYPES[name]
    entry = KAFKA_DEFAULTS.get(name)
    return entry[0] if entry is not None else None


def _java_hash(text: str) -> int:
    h = 0
    for char in text:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    return h


def properties_order(names: Iterable[str]) -> list[str]:
    """The order a java.util.Properties (a ConcurrentHashMap of 16 buckets, doubled past three quarters full)
    iterates these names in: Kafka's refusals list the names in that order."""
    names = list(names)
    buckets = 16
    while len(names) > buckets * 3 // 4:
        buckets *= 2

    def bucket(name: str) -> int:
        h = _java_hash(name)
        return ((h ^ (h >> 16)) & 0x7FFFFFFF) & (buckets - 1)

    return [name for _i, name in sorted(enumerate(names), key=lambda item: (bucket(item[1]), item[0]))]


def _scala_set(names: Iterable[str], kind: str = "Set") -> str:
    return f"{kind}({', '.join(properties_order(names))})"


def _definition(name: str) -> ConfigDef | None:
    """How a dynamic value of ``name`` is parsed: the topic config's validators for the log names, else its type."""
    if name in QUOTA_CONFIGS:
        return QUOTA_CONFIGS[name]
    topic = _BROKER_TO_TOPIC.get(name)
    if topic is not None and name != "log.cleanup.policy":
        return dataclasses.replace(topic, name=name)
    kind = DYNAMIC_TYPES.get(name)
    if kind is None:
        return None
    if name == "log.cleanup.policy":
        return dataclasses.replace(CONFIG_DEFS["cleanup.policy"], name=name)
    return ConfigDef(name, kind, "", "", "")


def validate(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs for the whole new config of one entity; INVALID_REQUEST with
    Kafka's message (its ConfigAdminManager turns each ConfigException into InvalidRequestException)."""

    def refuse(names: list[str], message: str, kind: str = "Set") -> None:
        if names:
            raise KafkaError(ErrorCode.invalid_request, f"{message}: {_scala_set(names, kind)}")

    refuse([n for n in props if n in NON_DYNAMIC], "Cannot update these configs dynamically")
    refuse([n for n in props if n in SECURITY_CONFIGS],
           "These security configs can be dynamically updated only per-listener using the listener prefix", "HashSet")
    for name, value in props.items():
        base = _base_name(name) or name
        definition = _definition(base)
        if definition is None:
            continue  # a custom name: Kafka keeps it without judging it
        try:
            definition.parse(value)
        except KafkaError as exc:
            raise KafkaError(ErrorCode.invalid_request, exc.message) from None
    if not per_broker:
        refuse([n for n in props if n in PER_BROKER or (_base_name(n) or "") in PER_BROKER],
               "Cannot update these configs at default cluster level, broker id must be specified")


def usable(props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
    """Kafka's fromPersistentProps: what a broker applies of a stored config, leaving out (as Kafka logs and ignores
    them) non-dynamic names, values that do not parse and per-broker names stored as the cluster default."""
    out: dict[str, str] = {}
    for name, value in props.items():
        try:
            validate({name: value}, per_broker)
        except KafkaError:
            continue
        out[name] = value
    return out


def overlay(props: dict[str, str], layer: Mapping[str, str]) -> None:
    """Kafka's overrideProps: each name of ``layer`` replaces itself and its synonyms in ``props``."""
    for name, value in layer.items():
        for synonym in synonyms(name, listener_override=False):
            props.pop(synonym, None)
        props[name] = value


def list_default(name: str) -> str | None:
    """A list config's default as text, for APPEND and SUBTRACT on a broker (None: not a list config)."""
    if config_type(name) is not ConfigType.LIST:
        return None
    entry = KAFKA_DEFAULTS.get(name)
    return entry[1] if entry is not None else None


def sources(
    name: str, dynamic_broker: Mapping[str, str], dynamic_default: Mapping[str, str], static: Mapping[str, str],
    defaults: Mapping[str, str | None],
) -> list[tuple[str, str | None, ConfigSource]]:
    """Kafka's ConfigHelper.configSynonyms: every synonym set at each level, levels in precedence order, from the
    first entry for ``name`` itself on (the listener base names before it are dropped)."""
    names = synonyms(name)
    found: list[tuple[str, str | None, ConfigSource]] = []
    for level, source in ((dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                          (dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                          (static, ConfigSource.STATIC_BROKER_CONFIG), (defaults, ConfigSource.DEFAULT_CONFIG)):
        found += [(n, level[n], source) for n in names if n in level]
    while found and found[0][0] != name:
        found.pop(0)
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerEntry:
    """One row of a broker resource's DescribeConfigs answer, as Kafka's ConfigHelper.createBrokerConfigEntry."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: int
    """Kafka's DescribeConfigs type id; 0 (UNKNOWN) for a name no KafkaConfig defines."""
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]


def describe_broker(
    *, per_broker: bool, dynamic_broker: Mapping[str, str], dynamic_default: Mapping[str, str],
    static: Mapping[str, str], own_defaults: Mapping[str, str | None], own_types: Mapping[str, int],
    names: Iterable[str] | None = None,
) -> list[BrokerEntry]:
    """A broker resource's configs. The cluster default (``per_broker`` False) lists its dynamic defaults alone, each
    with only that synonym; a broker lists every Kafka broker config, odradek's own (``own_defaults``, typed by
    ``own_types`` where Kafka has no such name) and the dynamic names set for it, each valued from the most specific
    level that sets it (Kafka's default where none does)."""
    defaults: dict[str, str | None] = {n: d for n, (_t, d) in KAFKA_DEFAULTS.items()}
    for name, default in own_defaults.items():
        defaults.setdefault(name, default)
    if per_broker:
        layered = dict(static)
        overlay(layered, dynamic_default)
        overlay(layered, dynamic_broker)
        listed: Iterable[str] = {*defaults, *dynamic_default, *dynamic_broker}
    else:
        layered = dict(dynamic_default)
        listed = dynamic_default
    wanted = sorted(listed) if names is None else [n for n in names if n in listed]
    set_defaults = {n: d for n, d in defaults.items() if d is not None}
    entries = []
    for name in wanted:
        kind = config_type(name)
        type_id = int(kind) if kind is not None else own_types.get(name, 0)
        if kind is None and name in QUOTA_CONFIGS:
            type_id = int(ConfigType.LONG)
        sensitive = type_id in (0, int(ConfigType.PASSWORD))
        found = sources(name, dynamic_broker, dynamic_default, static, set_defaults)
        if not per_broker:
            found = [s for s in found if s[2] is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        value = layered.get(name, defaults.get(name))
        entries.append(BrokerEntry(
            name=name, value=None if sensitive else value,
            source=found[0][2] if found else ConfigSource.DEFAULT_CONFIG, read_only=not is_dynamic(name),
            sensitive=sensitive, type=type_id,
            synonyms=tuple((n, None if sensitive else v, s) for n, v, s in found),
        ))
    return entries


def entity_of(name: str, broker_id: int) -> str:
    """The ``/config/brokers`` entity a BROKER resource names: ``<default>`` for "", else this broker's id;
    INVALID_REQUEST for anything else (Kafka's ConfigAdminManager.validateResourceNameIsCurrentNodeId)."""
    if not name:
        return DEFAULT_ENTITY
    try:
        node = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}") from None
    if node != broker_id:
        raise KafkaError(ErrorCode.invalid_request, f"Unexpected broker id, expected {broker_id}, but received {name}")
    return str(node)


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_operations(current: Mapping[str, str], ops: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
    """Kafka's ConfigAdminManager.prepareIncrementalConfigs over a broker entity's config, judged by KafkaConfig's
    names: APPEND and SUBTRACT only on a list config (INVALID_CONFIG otherwise, UNKNOWN_SERVER_ERROR for a name
    KafkaConfig does not know, as Kafka's lookup fails there)."""
    ops = list(ops)
    for _name, op, _value in ops:
        if op not in (SET, DELETE, APPEND, SUBTRACT):
            raise KafkaError(ErrorCode.invalid_request, f"Unknown operations type {op}")
    out = dict(current)
    for name, op, value in ops:
        if op == SET:
            out[name] = value or ""
        elif op == DELETE:
            out.pop(name, None)
        else:
            verb = "append" if op == APPEND else "subtract"
            if name not in KAFKA_DEFAULTS:
                raise KafkaError(ErrorCode.unknown_server_error, None)
            if config_type(name) is not ConfigType.LIST:
                raise KafkaError(ErrorCode.invalid_config, f"Config value {verb} is not allowed for config key: {name}")
            old = out.get(name, list_default(name) or "")
            given = (value or "").split(",")
            if op == APPEND:
                items = [v for v in old.split(",") if v] if old else []
                items += [v for v in given if v not in items]
            else:
                items = old.split(",")
                for v in given:
                    if v in items:
                        items.remove(v)
            out[name] = ",".join(items)
    return out


_THREAD_POOLS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir", "background.threads")


def check_reconfiguration(current: Mapping[str, str], new: Mapping[str, str]) -> None:
    """What Kafka's reconfigurables refuse of a valid config (DynamicThreadPool: a thread count may change at most
    to half or double), in the words its ``ConfigException("Invalid dynamic configuration", e)`` carries."""
    for name in _THREAD_POOLS:
        before = int(current.get(name) or KAFKA_DEFAULTS[name][1] or 0)
        after = int(new.get(name) or KAFKA_DEFAULTS[name][1] or 0)
        if after == before:
            continue
        reason = f"Dynamic thread count update validation failed for {name}={after}"
        if after <= 0:
            reason += ", value should be at least 1"
        elif after < before // 2:
            reason += f", value should be at least half the current value {before}"
        elif after > before * 2:
            reason += f", value should not be greater than double the current value {before}"
        else:
            continue
        raise KafkaError(ErrorCode.invalid_request, "Invalid value org.apache.kafka.common.config.ConfigException: "
                                                    f"{reason} for configuration Invalid dynamic configuration")


def check_passwords(props: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's toPersistentProps: a dynamic password config is stored encrypted with ``password.encoder.secret``,
    which odradek does not have, so it is refused as a Kafka broker without that secret refuses it."""
    passwords = {n for n, (t, _d) in KAFKA_DEFAULTS.items() if t is ConfigType.PASSWORD and n in DYNAMIC_TYPES}
    if any(any(name.endswith(p) for p in passwords) for name in props):
        raise KafkaError(ErrorCode.invalid_config, "Password config can be defined only at broker level"
                         if not per_broker else "Password encoder secret not configured")
