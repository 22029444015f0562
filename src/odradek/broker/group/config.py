"""Group coordinator settings under Kafka's own broker config names.

The broker passes its ``--override key=value`` pairs through :meth:`GroupConfig.from_overrides`, so an
operator who knows Kafka's names (``group.initial.rebalance.delay.ms``, ``offsets.retention.minutes``...) can
use them unchanged; names this layer does not own are ignored here, as other layers read them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Defaults are Kafka 3.x's; every field maps to one broker config name (see :data:`CONFIG_NAMES`)."""

    initial_rebalance_delay_ms: int = 3_000
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_retention_check_interval_ms: int = 600_000
    offsets_commit_timeout_ms: int = 5_000
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = 300_000
    """Not a Kafka config (Kafka hard-codes 5 minutes): how long a brand-new member may wait in a join."""
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    """KIP-848 server-side assignors, the first the default (``group.consumer.assignors``)."""
    consumer_migration_policy: str = "bidirectional"
    """``group.consumer.migration.policy``: bidirectional, upgrade, downgrade or disabled (online conversion
    between classic and consumer groups that have members)."""

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str]) -> GroupConfig:
        """Pick this layer's settings out of the broker's ``key=value`` overrides; a bad number raises
        ValueError."""
        values: dict[str, object] = {}
        for name, field_name in CONFIG_NAMES.items():
            if name in overrides:
                try:
                    values[field_name] = int(overrides[name])
                except ValueError:
                    raise ValueError(f"{name} must be an integer, got {overrides[name]!r}") from None
        if "group.consumer.assignors" in overrides:
            names = tuple(n.strip() for n in overrides["group.consumer.assignors"].split(",") if n.strip())
            unknown = [n for n in names if n not in ("uniform", "range")]
            if unknown or not names:
                raise ValueError(f"group.consumer.assignors: unknown assignors {unknown or names}")
            values["consumer_assignors"] = names
        if "group.consumer.migration.policy" in overrides:
            policy = overrides["group.consumer.migration.policy"].strip().lower()
            if policy not in ("bidirectional", "upgrade", "downgrade", "disabled"):
                raise ValueError(f"group.consumer.migration.policy: unknown policy {policy!r}")
            values["consumer_migration_policy"] = policy
        config = dataclasses.replace(cls(), **values)  # type: ignore[arg-type]
        if config.offsets_topic_num_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be at least 1")
        if config.min_session_timeout_ms > config.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
        return config


CONFIG_NAMES: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "initial_rebalance_delay_ms",
    "group.min.session.timeout.ms": "min_session_timeout_ms",
    "group.max.session.timeout.ms": "max_session_timeout_ms",
    "group.max.size": "max_size",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
    "offsets.topic.replication.factor": "offsets_topic_replication_factor",
    "offsets.topic.segment.bytes": "offsets_topic_segment_bytes",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offsets.commit.timeout.ms": "offsets_commit_timeout_ms",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
}
"""Kafka broker config name → :class:`GroupConfig` field."""
