"""Kafka's topic-level configs: names, types, defaults, validation, and how an effective value is resolved.

Clients and tools (kafka-configs.sh, AdminClient.describeConfigs, kcat -X) see these names and values, so they
are Kafka's own (3.x defaults). Resolution follows Kafka's order: a topic override wins, then the broker's
setting of the matching ``log.*`` name, then the built-in default; DescribeConfigs reports which of these
supplied each value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from odradek.errors import ErrorCode, KafkaError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ``config_type`` numbers (Kafka's ConfigDef.Type order)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs ``config_source`` numbers."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


ConfigValue = bool | int | float | str | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One topic config as Kafka's LogConfig defines it; ``broker_name`` is its server-default synonym ("" for the
    throttled-replica lists, which have none in Kafka's ServerTopicConfigSynonyms)."""

    name: str
    type: ConfigType
    default: ConfigValue
    broker_name: str
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    read_only: bool = False
    sensitive: bool = False

    def parse(self, raw: object) -> ConfigValue:
        """Turn a wire/string value into the typed value, raising Kafka's INVALID_CONFIG wording on
        failure."""
        text = raw if isinstance(raw, str) else _to_text(raw)
        text = text.strip()
        value: ConfigValue
        if self.type is ConfigType.BOOLEAN:
            low = text.lower()
            if low not in ("true", "false"):
                raise self._invalid(text, "Expected value to be either true or false")
            value = low == "true"
        elif self.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
            try:
                value = int(text)
            except ValueError:
                raise self._invalid(text, f"Not a number of type {self.type.name}") from None
            limit = {ConfigType.INT: INT_MAX, ConfigType.LONG: LONG_MAX, ConfigType.SHORT: 2**15 - 1}[
                self.type
            ]
            if not -limit - 1 <= value <= limit:
                raise self._invalid(text, f"Not a number of type {self.type.name}")
        elif self.type is ConfigType.DOUBLE:
            try:
                value = float(text)
            except ValueError:
                raise self._invalid(text, "Not a number of type DOUBLE") from None
            if math.isnan(value):
                raise self._invalid(text, "Not a number of type DOUBLE")
        elif self.type is ConfigType.LIST:
            value = tuple(item.strip() for item in text.split(",") if item.strip())
        else:
            value = text
        self._check_range(text, value)
        return value

    def _check_range(self, text: str, value: ConfigValue) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool):
            if self.minimum is not None and value < self.minimum:
                raise self._invalid(text, f"Value must be at least {_num(self.minimum)}")
            if self.maximum is not None and value > self.maximum:
                raise self._invalid(text, f"Value must be no more than {_num(self.maximum)}")
        if self.choices is not None:
            # an empty list passes (Kafka's ValidList): SUBTRACT may leave cleanup.policy empty, which Kafka accepts
            items = value if isinstance(value, tuple) else (value,)
            for item in items:
                if item not in self.choices:
                    raise self._invalid(text, f"String must be one of: {', '.join(self.choices)}")

    def _invalid(self, text: str, reason: str) -> KafkaError:
        message = f"Invalid value {text} for configuration {self.name}: {reason}"
        return KafkaError(ErrorCode.invalid_config, message)

    def render(self, value: ConfigValue) -> str:
        """The string DescribeConfigs shows: Kafka renders lists comma-joined and booleans lower-case."""
        return _to_text(value)


def _to_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_T = ConfigType
CONFIG_DEFS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef("cleanup.policy", _T.LIST, ("delete",), "log.cleanup.policy",
                  "Retention policy: delete old segments, compact to the latest value per key, or both.",
                  choices=("compact", "delete")),
        ConfigDef("compression.type", _T.STRING, "producer", "compression.type",
                  "Final compression of the topic; 'producer' keeps the producer's codec.",
                  choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
        ConfigDef("delete.retention.ms", _T.LONG, 86_400_000, "log.cleaner.delete.retention.ms",
                  "How long tombstones are kept in compacted topics.", minimum=0),
        ConfigDef("file.delete.delay.ms", _T.LONG, 60_000, "log.segment.delete.delay.ms",
                  "Wait before deleting a file from the filesystem.", minimum=0),
        ConfigDef("flush.messages", _T.LONG, LONG_MAX, "log.flush.interval.messages",
                  "Messages appended between fsyncs.", minimum=1),
        ConfigDef("flush.ms", _T.LONG, LONG_MAX, "log.flush.interval.ms",
                  "Maximum time between fsyncs.", minimum=0),
        ConfigDef("follower.replication.throttled.replicas", _T.LIST, (), "",
                  "Replicas whose log replication is throttled on the follower side."),
        ConfigDef("index.interval.bytes", _T.INT, 4096, "log.index.interval.bytes",
                  "Bytes between offset-index entries.", minimum=0),
        ConfigDef("leader.replication.throttled.replicas", _T.LIST, (), "",
                  "Replicas whose log replication is throttled on the leader side."),
        ConfigDef("max.compaction.lag.ms", _T.LONG, LONG_MAX, "log.cleaner.max.compaction.lag.ms",
                  "Maximum time a message stays ineligible for compaction.", minimum=1),
        ConfigDef("max.message.bytes", _T.INT, 1_048_588, "message.max.bytes",
                  "Largest record batch size allowed.", minimum=0),
        ConfigDef("message.downconversion.enable", _T.BOOLEAN, True, "log.message.downconversion.enable",
                  "Whether down-conversion of message formats is enabled for consumers."),
        ConfigDef("message.timestamp.after.max.ms", _T.LONG, LONG_MAX, "log.message.timestamp.after.max.ms",
                  "Allowed amount a batch timestamp may be ahead of the broker clock.", minimum=0),
        ConfigDef("message.timestamp.before.max.ms", _T.LONG, LONG_MAX, "log.message.timestamp.before.max.ms",
                  "Allowed amount a batch timestamp may be behind the broker clock.", minimum=0),
        ConfigDef("message.timestamp.difference.max.ms", _T.LONG, LONG_MAX,
                  "log.message.timestamp.difference.max.ms",
                  "Deprecated: maximum difference between a message timestamp and the broker clock.",
                  minimum=0),
        ConfigDef("message.timestamp.type", _T.STRING, "CreateTime", "log.message.timestamp.type",
                  "Whether records keep the producer's timestamp or get the broker's append time.",
                  choices=("CreateTime", "LogAppendTime")),
        ConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, 0.5, "log.cleaner.min.cleanable.ratio",
                  "Dirty fraction of the log that triggers compaction.", minimum=0, maximum=1),
        ConfigDef("min.compaction.lag.ms", _T.LONG, 0, "log.cleaner.min.compaction.lag.ms",
                  "Minimum time a message stays uncompacted.", minimum=0),
        ConfigDef("min.insync.replicas", _T.INT, 1, "min.insync.replicas",
                  "Replicas that must acknowledge an acks=all write.", minimum=1),
        ConfigDef("preallocate", _T.BOOLEAN, False, "log.preallocate",
                  "Preallocate segment files (accepted; odradek does not preallocate)."),
        ConfigDef("retention.bytes", _T.LONG, -1, "log.retention.bytes",
                  "Maximum partition size before old segments are deleted; -1 for no limit."),
        ConfigDef("retention.ms", _T.LONG, 604_800_000, "log.retention.ms",
                  "Maximum age of a segment's newest record before the segment is deleted; -1 for no limit.",
                  minimum=-1),
        ConfigDef("segment.bytes", _T.INT, 1_073_741_824, "log.segment.bytes",
                  "Segment file size at which a new segment is rolled.", minimum=14),
        ConfigDef("segment.index.bytes", _T.INT, 10_485_760, "log.index.size.max.bytes",
                  "Maximum size of an offset or time index; a full index rolls the segment.", minimum=4),
        ConfigDef("segment.jitter.ms", _T.LONG, 0, "log.roll.jitter.ms",
                  "Maximum random jitter subtracted from segment.ms.", minimum=0),
        ConfigDef("segment.ms", _T.LONG, 604_800_000, "log.roll.ms",
                  "Time after which a segment is rolled even if not full.", minimum=1),
        ConfigDef("unclean.leader.election.enable", _T.BOOLEAN, False, "unclean.leader.election.enable",
                  "Whether replicas outside the ISR may become leader, at the risk of data loss."),
    )
}

_BROKER_SYNONYMS: dict[str, str] = {d.broker_name: d.name for d in CONFIG_DEFS.values() if d.broker_name}


def definition(name: str) -> ConfigDef:
    try:
        return CONFIG_DEFS[name]
    except KeyError:
        raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {name}") from None


def validate_overrides(overrides: Mapping[str, object]) -> dict[str, ConfigValue]:
    """Parse and check a CreateTopics/AlterConfigs override set; the first bad entry raises INVALID_CONFIG."""
    return {name: definition(name).parse(raw) for name, raw in overrides.items()}


def broker_defaults_from_properties(props: Mapping[str, str]) -> dict[str, ConfigValue]:
    """Topic-config defaults from server.properties names (``log.retention.hours``, ``log.segment.bytes``).

    Kafka lets ``log.retention.ms`` beat ``log.retention.minutes`` beat ``log.retention.hours``, and likewise
    for ``log.roll.*``; unrelated keys are ignored so a whole broker config can be passed in.
    """
    out: dict[str, ConfigValue] = {}
    for key, raw in props.items():
        topic_name = _BROKER_SYNONYMS.get(key)
        if topic_name is not None:
            out[topic_name] = definition(topic_name).parse(raw)
    for topic_name, prefix in (("retention.ms", "log.retention"), ("segment.ms", "log.roll")):
        if f"{prefix}.ms" in props:
            continue
        for unit, factor in (("minutes", 60_000), ("hours", 3_600_000)):
            if f"{prefix}.{unit}" in props:
                out[topic_name] = definition(topic_name).parse(str(int(props[f"{prefix}.{unit}"]) * factor))
                break
    return out


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One row of a DescribeConfigs answer."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    read_only: bool
    sensitive: bool
    type: ConfigType
    doc: str
    synonyms: tuple[tuple[str, str, ConfigSource], ...]


def resolve(
    overrides: Mapping[str, ConfigValue], broker_defaults: Mapping[str, ConfigValue] | None = None
) -> dict[str, ConfigValue]:
    """Effective typed values: topic override, else broker default, else Kafka's default."""
    broker_defaults = broker_defaults or {}
    return {
        name: overrides.get(name, broker_defaults.get(name, d.default)) for name, d in CONFIG_DEFS.items()
    }


_NO_SERVER_DEFAULT = frozenset({"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms"})
"""Broker synonyms whose Kafka default is null (the hours/scheduler setting behind them decides): Kafka's
ConfigHelper lists no DEFAULT_CONFIG synonym for them (its ``dropWhile`` drops the hours one), and the topic
config's own source is then DEFAULT_CONFIG with the topic default as value."""


BrokerLevels = Sequence[tuple[ConfigSource, Mapping[str, ConfigValue]]]
"""The broker's topic-config defaults level by level, most specific first: its dynamic configs, the dynamic cluster
defaults, its static settings (see :meth:`odradek.broker.config.BrokerConfig.topic_default_levels`)."""


def describe(
    overrides: Mapping[str, ConfigValue],
    broker_defaults: Mapping[str, ConfigValue] | BrokerLevels | None = None,
    names: Iterable[str] | None = None,
) -> list[ConfigEntry]:
    """Every config (or the named ones) with its value and provenance, synonyms most specific first.
    ``broker_defaults`` is either the static defaults alone or the levels."""
    levels: BrokerLevels = (
        [(ConfigSource.STATIC_BROKER_CONFIG, broker_defaults)] if isinstance(broker_defaults, Mapping)
        else broker_defaults or []
    )
    wanted = sorted(CONFIG_DEFS) if names is None else list(names)
    entries: list[ConfigEntry] = []
    for name in wanted:
        d = CONFIG_DEFS.get(name)
        if d is None:
            continue  # Kafka omits unknown names from a DescribeConfigs answer rather than failing it
        synonyms: list[tuple[str, str, ConfigSource]] = []
        if name in overrides:
            synonyms.append((name, d.render(overrides[name]), ConfigSource.DYNAMIC_TOPIC_CONFIG))
        for level_source, level in levels:
            if name in level:
                synonyms.append((d.broker_name, d.render(level[name]), level_source))
        if d.broker_name and d.broker_name not in _NO_SERVER_DEFAULT:
            synonyms.append((d.broker_name, d.render(d.default), ConfigSource.DEFAULT_CONFIG))
        value_text, source = synonyms[0][1:] if synonyms else (d.render(d.default), ConfigSource.DEFAULT_CONFIG)
        entries.append(
            ConfigEntry(
                name=name,
                value=None if d.sensitive else value_text,
                source=source,
                is_default=source is ConfigSource.DEFAULT_CONFIG,
                read_only=d.read_only,
                sensitive=d.sensitive,
                type=d.type,
                doc=d.doc,
                synonyms=tuple(synonyms),
            )
        )
    return entries


def _field(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Typed effective topic config that the log reads on its hot paths (one attribute lookup, no parsing)."""

    cleanup_policy: tuple[str, ...] = ("delete",)
    compression_type: str = "producer"
    delete_retention_ms: int = 86_400_000
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    index_interval_bytes: int = 4096
    max_compaction_lag_ms: int = LONG_MAX
    max_message_bytes: int = 1_048_588
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1
    retention_bytes: int = -1
    retention_ms: int = 604_800_000
    segment_bytes: int = 1_073_741_824
    segment_index_bytes: int = 10_485_760
    segment_jitter_ms: int = 0
    segment_ms: int = 604_800_000
    unclean_leader_election_enable: bool = False

    @classmethod
    def from_values(cls, values: Mapping[str, ConfigValue]) -> LogConfig:
        known = {f for f in cls.__dataclass_fields__}
        kwargs: dict[str, Any] = {}
        for name, value in values.items():
            key = _field(name)
            if key in known:
                kwargs[key] = value
        return cls(**kwargs)

    @classmethod
    def build(
        cls,
        overrides: Mapping[str, object] | None = None,
        broker_defaults: Mapping[str, ConfigValue] | None = None,
    ) -> LogConfig:
        """Validate string overrides (as CreateTopics sends them) and resolve them against the defaults."""
        return cls.from_values(resolve(validate_overrides(overrides or {}), broker_defaults))

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

