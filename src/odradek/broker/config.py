"""Broker configuration under Kafka's own names and defaults.

Users bring ``server.properties`` habits: ``--override num.partitions=3`` must mean what it means to Kafka. The
catalogue below is the subset odradek implements; an unknown name is refused rather than silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.security.listeners import listener_setting
from odradek.security.tls import TLS_DEFAULTS

if TYPE_CHECKING:
    from odradek.broker.topic_config import BrokerLevels

# name -> (type, default)
BROKER_DEFAULTS: dict[str, tuple[type, Any]] = {
    "broker.id": (int, 0),
    "broker.rack": (str, None),
    # Kafka's log directories: log.dirs (comma-separated) wins over log.dir; with neither, the data dir alone
    "log.dirs": (str, None),
    "log.dir": (str, None),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (bool, True),
    "delete.topic.enable": (bool, True),
    "message.max.bytes": (int, 1048588),
    "socket.request.max.bytes": (int, 104857600),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.topic.replication.factor": (int, 3),
    "offsets.topic.segment.bytes": (int, 104857600),
    "offsets.retention.minutes": (int, 10080),
    "offsets.commit.timeout.ms": (int, 5000),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "group.max.size": (int, 2147483647),
    "group.consumer.session.timeout.ms": (int, 45000),
    "group.consumer.heartbeat.interval.ms": (int, 5000),
    "group.consumer.assignors": (str, "uniform,range"),
    "group.consumer.migration.policy": (str, "bidirectional"),
    "min.insync.replicas": (int, 1),
    "unclean.leader.election.enable": (bool, False),
    "replica.lag.time.max.ms": (int, 30000),
    "replica.fetch.max.bytes": (int, 1048576),
    "replica.fetch.wait.max.ms": (int, 500),
    # KIP-227 fetch sessions a leader keeps (0: none; fetchers then send full requests)
    "max.incremental.fetch.session.cache.slots": (int, 1000),
    "auto.leader.rebalance.enable": (bool, True),
    "leader.imbalance.per.broker.percentage": (int, 10),
    "leader.imbalance.check.interval.seconds": (int, 300),
    "controlled.shutdown.enable": (bool, True),
    "controlled.shutdown.max.retries": (int, 3),
    # authorization (ACLs): empty = none, as in Kafka; AclAuthorizer and StandardAuthorizer both mean the built-in one
    "authorizer.class.name": (str, ""),
    "super.users": (str, ""),
    "allow.everyone.if.no.acl.found": (bool, False),
    "log.segment.bytes": (int, 1073741824),
    "log.roll.ms": (int, 604800000),
    "log.retention.ms": (int, 604800000),
    "log.retention.bytes": (int, -1),
    "log.flush.interval.messages": (int, 9223372036854775807),
    "log.flush.interval.ms": (int, 9223372036854775807),
    "log.index.interval.bytes": (int, 4096),
    "log.retention.check.interval.ms": (int, 300000),
    "log.message.timestamp.type": (str, "CreateTime"),
    "log.cleanup.policy": (str, "delete"),
    "compression.type": (str, "producer"),
    "producer.id.expiration.ms": (int, 86400000),
    "transaction.state.log.num.partitions": (int, 50),
    "transaction.state.log.replication.factor": (int, 3),
    "transaction.state.log.min.isr": (int, 2),
    "transaction.state.log.segment.bytes": (int, 104857600),
    "transaction.max.timeout.ms": (int, 900000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (int, 10000),
    "transactional.id.expiration.ms": (int, 604800000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (int, 3600000),
    "request.timeout.ms": (int, 30000),
    # client quotas: Kafka's sensors keep quota.window.num samples of quota.window.size.seconds each
    "quota.window.num": (int, 11),
    "quota.window.size.seconds": (int, 1),
    "zookeeper.session.timeout.ms": (int, 18000),
    "zookeeper.connect": (str, None),
    # Listeners and security (issue 14): Kafka's names and defaults; see odradek.security.listeners
    "listeners": (str, None),
    "advertised.listeners": (str, None),
    "listener.security.protocol.map": (
        str, "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    "inter.broker.listener.name": (str, None),
    "security.inter.broker.protocol": (str, "PLAINTEXT"),
    "sasl.enabled.mechanisms": (str, "GSSAPI"),
    "sasl.mechanism.inter.broker.protocol": (str, "GSSAPI"),
    "connection.failed.authentication.delay.ms": (int, 100),
    "connections.max.reauth.ms": (int, 0),
    **TLS_DEFAULTS,  # ssl.*: security/tls.py holds their names and Kafka's defaults
    # connection limits (broker/limits.py); Kafka's max.connections and max.connections.per.ip are Integer.MAX
    "max.connections": (int, 2147483647),
    "max.connections.per.ip": (int, 2147483647),
    "max.connections.per.ip.overrides": (str, ""),
    "connections.max.idle.ms": (int, 600000),
}


def _typed(kafka_type: str, *names: str) -> dict[str, str]:
    return dict.fromkeys(names, kafka_type)


KAFKA_CONFIG_TYPES: dict[str, str] = {
    **_typed("INT", "broker.id", "num.partitions", "default.replication.factor", "message.max.bytes",
            "socket.request.max.bytes", "offsets.topic.num.partitions", "offsets.topic.segment.bytes",
            "offsets.retention.minutes", "offsets.commit.timeout.ms", "group.initial.rebalance.delay.ms",
            "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.max.size",
            "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms", "min.insync.replicas",
            "replica.fetch.max.bytes", "replica.fetch.wait.max.ms", "max.incremental.fetch.session.cache.slots",
            "leader.imbalance.per.broker.percentage", "controlled.shutdown.max.retries", "log.segment.bytes",
            "log.index.interval.bytes", "producer.id.expiration.ms", "transaction.state.log.num.partitions",
            "transaction.state.log.min.isr", "transaction.state.log.segment.bytes", "transaction.max.timeout.ms",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms", "transactional.id.expiration.ms",
            "transaction.remove.expired.transaction.cleanup.interval.ms", "request.timeout.ms", "quota.window.num",
            "quota.window.size.seconds", "zookeeper.session.timeout.ms",
            "connection.failed.authentication.delay.ms", "max.connections", "max.connections.per.ip"),
    **_typed("SHORT", "offsets.topic.replication.factor", "transaction.state.log.replication.factor"),
    **_typed("LIST", "group.consumer.assignors", "log.cleanup.policy", "sasl.enabled.mechanisms",
            "ssl.enabled.protocols"),
}
"""Kafka's ConfigDef type of the broker configs whose Python kind above does not tell it (an ``int`` is Kafka's LONG
and a ``str`` its STRING unless named here), as DescribeConfigs reports them; read from Kafka 3.9's own answer."""

SENSITIVE = frozenset({
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key",
    # PEM contents Kafka types PASSWORD, so it never sends them back either
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
})
"""Kafka's PASSWORD-type configs among ours: DescribeConfigs reports them as sensitive, with no value."""

LISTENER_PREFIX = "listener.name."
"""Kafka's per-listener overrides: ``listener.name.<listener, lower case>.<config>`` wins over ``<config>`` on that
listener (KafkaConfig.valuesWithPrefixOverride). One of our own configs under it is typed as that config; any other
name under it (``listener.name.sasl_plaintext.plain.sasl.jaas.config``, ...) is accepted as a string, as Kafka
accepts them; read through :func:`odradek.security.listeners.listener_setting` or
:meth:`BrokerConfig.for_listener`."""

LISTENER_OVERRIDABLE = ("ssl.", "max.connections")


def listener_override_base(name: str) -> str | None:
    """The config a ``listener.name.<l>.<config>`` name overrides, or None if it is no such override."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    rest = name[len(LISTENER_PREFIX):]
    listener, dot, base = rest.partition(".")
    if not listener or not dot or base not in BROKER_DEFAULTS or not base.startswith(LISTENER_OVERRIDABLE):
        return None
    return base


def _parse(name: str, kind: type, raw: str) -> Any:
    if kind is bool:
        lowered = raw.strip().lower()
        if lowered not in ("true", "false"):
            raise ValueError(f"{name}: expected true or false, got {raw!r}")
        return lowered == "true"
    if kind is int:
        return int(raw)
    return raw


@dataclass(frozen=True)
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 0
    data_dir: str = ".odradek-data"
    values: Mapping[str, Any] = field(default_factory=lambda: {k: v for k, (_t, v) in BROKER_DEFAULTS.items()})
    explicit: frozenset[str] = frozenset()
    static: dict[str, Any] = field(default_factory=dict)
    """The values the broker started with; :attr:`values` is them overlaid by the dynamic layers below."""
    dynamic_broker: dict[str, str] = field(default_factory=dict)
    """This broker's dynamic configs (``/config/brokers/<id>``), as applied: set by :meth:`apply_dynamic`."""
    dynamic_default: dict[str, str] = field(default_factory=dict)
    """The cluster-wide dynamic defaults (``/config/brokers/<default>``), as applied."""

    def __post_init__(self) -> None:
        if not self.static:
            self.static.update(self.values)

    @classmethod
    def build(
        cls, *, host: str = "127.0.0.1", port: int = 0, data_dir: str = ".odradek-data",
        overrides: Mapping[str, str] | None = None, **typed: Any,
    ) -> BrokerConfig:
        values = {k: v for k, (_t, v) in BROKER_DEFAULTS.items()}
        for name, raw in (overrides or {}).items():
            base = listener_override_base(name)
            if base is not None:
                values[name] = _parse(name, BROKER_DEFAULTS[base][0], raw)
                continue
            if name.startswith(LISTENER_PREFIX) and len(name.split(".")) > 3:
                values[name] = raw
                continue
            if name not in BROKER_DEFAULTS:
                raise ValueError(f"unknown broker config {name!r}")
            values[name] = _parse(name, BROKER_DEFAULTS[name][0], raw)
        values.update(typed)
        from odradek.security.authorizer import check_settings

        check_settings(values)  # a bad authorizer.class.name or super.users is refused here, like any bad value
        explicit = frozenset((overrides or {}).keys()) | frozenset(typed)
        return cls(host=host, port=port, data_dir=data_dir, values=values, explicit=explicit)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def static_properties(self) -> dict[str, str]:
        """What server.properties (here: the settings given) sets, as text: Kafka's STATIC_BROKER_CONFIG level."""
        return {k: _text(v) for k, v in self.static.items() if k in self.explicit and v is not None}

    def layered_properties(self) -> dict[str, str]:
        """The static settings overlaid by the dynamic defaults, then this broker's dynamic configs, a dynamic
        name replacing its synonyms (Kafka's DynamicBrokerConfig.updateCurrentConfig)."""
        from odradek.broker.dynamic_config import overlay

        props = self.static_properties()
        overlay(props, self.dynamic_default)
        overlay(props, self.dynamic_broker)
        return props

    def apply_dynamic(self, dynamic_broker: Mapping[str, str], dynamic_default: Mapping[str, str]) -> None:
        """Make ``values`` the static ones overlaid by these dynamic layers (values already checked by
        :func:`odradek.broker.dynamic_config.usable`); names odradek does not implement are only kept in the
        layers, for DescribeConfigs."""
        self.dynamic_broker.clear()
        self.dynamic_broker.update(dynamic_broker)
        self.dynamic_default.clear()
        self.dynamic_default.update(dynamic_default)
        values = dict(self.static)
        for name, raw in self.layered_properties().items():
            if name in BROKER_DEFAULTS and (name in self.dynamic_broker or name in self.dynamic_default):
                values[name] = _parse(name, BROKER_DEFAULTS[name][0], raw)
        assert isinstance(self.values, dict)
        self.values.clear()
        self.values.update(values)

    def for_listener(self, listener: str, name: str) -> Any:
        """``name`` as the listener ``listener`` sees it: its ``listener.name.<l>.`` override, else the broker's."""
        return listener_setting(self.values, listener, name)

    @property
    def broker_id(self) -> int:
        return int(self.values["broker.id"])

    @property
    def log_dirs(self) -> list[str]:
        """Where partitions live: ``log.dirs``, else ``log.dir``, else the data directory (odradek's default)."""
        for name in ("log.dirs", "log.dir"):
            raw = self.values.get(name)
            if raw:
                dirs = [d.strip() for d in str(raw).split(",") if d.strip()]
                if dirs:
                    return dirs
        return [self.data_dir]

    @property
    def rack(self) -> str | None:
        rack = self.values["broker.rack"]
        return str(rack) if rack else None

    def properties(self) -> dict[str, str]:
        """Every setting as server.properties text (booleans lower-case, unset values left out)."""
        return {k: _text(v) for k, v in self.values.items() if v is not None}

    def topic_defaults(self) -> dict[str, Any]:
        """The broker-level defaults of topic configs (``log.retention.ms`` for ``retention.ms``, ...), typed: the
        static settings and the dynamic ones over them."""
        from odradek.broker.topic_config import broker_defaults_from_properties

        return broker_defaults_from_properties(self.layered_properties())

    def topic_default_levels(self) -> BrokerLevels:
        """The topic-config defaults level by level, as DescribeConfigs lists a topic config's synonyms."""
        from odradek.broker.topic_config import ConfigSource, broker_defaults_from_properties

        return [(ConfigSource.DYNAMIC_BROKER_CONFIG, broker_defaults_from_properties(self.dynamic_broker)),
                (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, broker_defaults_from_properties(self.dynamic_default)),
                (ConfigSource.STATIC_BROKER_CONFIG, broker_defaults_from_properties(self.static_properties()))]


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
