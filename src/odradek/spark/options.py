"""Reader and writer options, spelled as Spark's built-in Kafka source spells them.

Parsing is pure and happens once on the driver, so a typo fails the query at definition time rather than
inside an executor. Offsets in JSON use Spark's conventions: ``{"topic": {"0": 23}}``, -2 = earliest,
-1 = latest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

TopicPartition = tuple[str, int]

EARLIEST = -2
LATEST = -1

_FORBIDDEN_CLIENT_KEYS = {
    "group.id": "the source tracks offsets in Spark's checkpoint, not in a consumer group",
    "auto.offset.reset": "use startingOffsets",
    "key.deserializer": "keys are always binary; cast them in the query",
    "value.deserializer": "values are always binary; cast them in the query",
    "key.serializer": "the sink writes binary or string columns as they are",
    "value.serializer": "the sink writes binary or string columns as they are",
    "enable.auto.commit": "the source never commits to the cluster",
    "transactional.id": "every sink task needs its own id: give transactionalIdPrefix instead",
}


class OptionError(ValueError):
    """An option is missing, malformed, or not allowed in this mode."""


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: a topic list, a regular expression over topic names, or fixed partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        if self.assign:
            return any(t == topic for t, _ in self.assign)
        return topic in self.topics


@dataclass(frozen=True)
class OffsetBound:
    """Where a read starts or ends: earliest/latest, explicit offsets, one timestamp, or per-partition times."""

    kind: Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = 0


@dataclass(frozen=True)
class SourceOptions:
    """Everything the reader needs, already validated."""

    client_config: dict[str, str]
    subscription: Subscription
    starting: OffsetBound
    ending: OffsetBound
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    timestamp_strategy: Literal["error", "latest"]
    poll_timeout_ms: int
    max_partition_fetch_bytes: int
    read_committed: bool = False
    """kafka.isolation.level=read_committed: plan to the last stable offset, skip aborted transactions."""
    min_offsets_per_trigger: int | None = None
    """Skip a micro-batch while fewer new offsets than this exist, unless max_trigger_delay_ms has passed."""
    max_trigger_delay_ms: int = 15 * 60 * 1000
    """Spark's Kafka default for maxTriggerDelay: 15m."""


@dataclass(frozen=True)
class SinkOptions:
    """What the writer needs: where to write and how the streaming sink records committed batches."""

    client_config: dict[str, str]
    topic: str | None
    commit_topic_prefix: str
    transactional_id_prefix: str | None = None
    """Set: the streaming sink writes each task's part of a micro-batch in one Kafka transaction."""


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix stripped, as confluent-kafka configuration."""
    config: dict[str, str] = {}
    for key, value in options.items():
        if not key.lower().startswith("kafka."):
            continue
        name = key[len("kafka.") :]
        if name.lower() in _FORBIDDEN_CLIENT_KEYS:
            raise OptionError(f"kafka.{name} is not supported: {_FORBIDDEN_CLIENT_KEYS[name.lower()]}")
        config[name] = value
    if "bootstrap.servers" not in config:
        raise OptionError("option kafka.bootstrap.servers is required")
    return config


def _get(options: Mapping[str, str], name: str) -> str | None:
    for key, value in options.items():
        if key.lower() == name.lower():
            return value
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _get(options, name)
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise OptionError(f"option {name} must be true or false, got {value!r}")


_DURATION_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"\s*(\d+)\s*([a-z]*)\s*")


def _duration_ms(options: Mapping[str, str], name: str, default_ms: int) -> int:
    """A Spark time string (``15m``, ``30s``, ``500ms``; a bare number is milliseconds), as Spark's Kafka source
    parses maxTriggerDelay."""
    value = _get(options, name)
    if value is None:
        return default_ms
    match = _DURATION.fullmatch(value.lower())
    if match is None or match.group(2) not in ("", *_DURATION_UNITS_MS):
        raise OptionError(f"option {name} must be a duration such as 15m, 30s or 500ms, got {value!r}")
    return int(int(match.group(1)) * _DURATION_UNITS_MS.get(match.group(2) or "ms", 1))


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    value = _get(options, name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError as exc:
        raise OptionError(f"option {name} must be an integer, got {value!r}") from exc
    if number <= 0:
        raise OptionError(f"option {name} must be positive, got {number}")
    return number


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = {name: _get(options, name) for name in ("subscribe", "subscribePattern", "assign")}
    present = [name for name, value in given.items() if value is not None]
    if len(present) != 1:
        raise OptionError("exactly one of subscribe, subscribePattern or assign must be given")
    if given["subscribe"] is not None:
        topics = tuple(t.strip() for t in given["subscribe"].split(",") if t.strip())
        if not topics:
            raise OptionError("subscribe lists no topic")
        return Subscription(topics=topics)
    if given["subscribePattern"] is not None:
        try:
            re.compile(given["subscribePattern"])
        except re.error as exc:
            raise OptionError(f"subscribePattern is not a valid regular expression: {exc}") from exc
        return Subscription(pattern=given["subscribePattern"])
    raw = _json(given["assign"] or "", "assign")
    pairs: list[TopicPartition] = []
    for topic, parts in raw.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) for p in parts):
            raise OptionError('assign must look like {"topicA":[0,1],"topicB":[2,4]}')
        pairs.extend((topic, p) for p in parts)
    if not pairs:
        raise OptionError("assign lists no partition")
    return Subscription(assign=tuple(sorted(set(pairs))))


def _json(text: str, name: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} is not valid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise OptionError(f"option {name} must be a JSON object")
    return value


def _partition_map(text: str, name: str) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json(text, name).items():
        if not isinstance(parts, dict):
            raise OptionError(f'option {name} must look like {{"topic": {{"0": 23}}}}')
        for partition, value in parts.items():
            try:
                out[(topic, int(partition))] = int(value)
            except (TypeError, ValueError) as exc:
                raise OptionError(f"option {name}: bad entry {topic}/{partition}: {value!r}") from exc
    return out


def _bound(options: Mapping[str, str], prefix: str, default: str) -> OffsetBound:
    """Resolve one of start/end; a timestamp option wins over per-partition times, which win over offsets."""
    ts = _get(options, f"{prefix}Timestamp")
    if ts is not None:
        try:
            return OffsetBound("timestamp", timestamp=int(ts))
        except ValueError as exc:
            raise OptionError(f"option {prefix}Timestamp must be milliseconds since the epoch") from exc
    by_ts = _get(options, f"{prefix}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetBound("timestamps", offsets=_partition_map(by_ts, f"{prefix}OffsetsByTimestamp"))
    text = (_get(options, f"{prefix}Offsets") or default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetBound(text.lower())  # type: ignore[arg-type]
    return OffsetBound("offsets", offsets=_partition_map(text, f"{prefix}Offsets"))


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate reader options the way Spark's Kafka source does for the given mode."""
    starting = _bound(options, "starting", "latest" if streaming else "earliest")
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if _get(options, name) is not None:
                raise OptionError(f"option {name} is for batch queries only")
        ending = OffsetBound("latest")
    else:
        ending = _bound(options, "ending", "latest")
        if starting.kind == "latest" or (starting.kind == "offsets" and LATEST in starting.offsets.values()):
            raise OptionError("startingOffsets may not be latest in a batch query")
        if ending.kind == "earliest" or (ending.kind == "offsets" and EARLIEST in ending.offsets.values()):
            raise OptionError("endingOffsets may not be earliest in a batch query")
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("startingOffsetsByTimestampStrategy must be error or latest")
    config = client_config(options)
    protocol = config.get("security.protocol", "plaintext").lower()
    if protocol != "plaintext":
        raise OptionError(
            f"kafka.security.protocol={protocol}: the source fetches over its own PLAINTEXT client "
            "(the sink accepts any protocol confluent-kafka supports)"
        )
    isolation = config.pop("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError("kafka.isolation.level must be read_uncommitted or read_committed")
    poll = _positive_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000
    most, least = _positive_int(options, "maxOffsetsPerTrigger"), _positive_int(options, "minOffsetsPerTrigger")
    if most is not None and least is not None and least > most:
        raise OptionError(f"minOffsetsPerTrigger ({least}) is higher than maxOffsetsPerTrigger ({most})")
    fetch_bytes = _positive_int(options, "fetch.max.partition.bytes")
    fetch_bytes = fetch_bytes or int(config.pop("max.partition.fetch.bytes", str(8 * 1024 * 1024)))
    return SourceOptions(
        client_config=config,
        subscription=parse_subscription(options),
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=most,
        min_partitions=_positive_int(options, "minPartitions"),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        timestamp_strategy=strategy,  # type: ignore[arg-type]
        poll_timeout_ms=poll,
        max_partition_fetch_bytes=fetch_bytes,
        read_committed=isolation == "read_committed",
        min_offsets_per_trigger=least,
        max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", 15 * 60 * 1000),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    return SinkOptions(
        client_config=client_config(options),
        topic=_get(options, "topic"),
        commit_topic_prefix=_get(options, "sinkCommitTopicPrefix") or "_odradek_sink_commits",
        transactional_id_prefix=_transactional_prefix(options),
    )


def _transactional_prefix(options: Mapping[str, str]) -> str | None:
    prefix = _get(options, "transactionalIdPrefix")
    if prefix is None:
        return None
    if not prefix.strip():
        raise OptionError("option transactionalIdPrefix must not be empty")
    return prefix.strip()
