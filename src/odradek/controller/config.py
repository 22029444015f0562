"""The controller's configuration (seed 001 section 1's ``KafkaConfig`` field), read once from the broker's config
with Kafka's names and defaults.

Parsed up front so a bad value fails at construction, not in the middle of a failover, and so the managers share
one typed object instead of each reading the raw mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ControllerConfig", "flag"]


def flag(value: Any) -> bool:
    """A boolean config value as Kafka reads it (``"true"`` in any case; anything else is false)."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    unclean_default: bool = False
    delete_enabled: bool = True
    auto_rebalance: bool = True
    imbalance_pct: int = 10
    check_interval_s: float = 300.0
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    listener: str = "PLAINTEXT"

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None) -> ControllerConfig:
        cfg = dict(config or {})
        return cls(
            unclean_default=flag(cfg.get("unclean.leader.election.enable", False)),
            delete_enabled=flag(cfg.get("delete.topic.enable", True)),
            auto_rebalance=flag(cfg.get("auto.leader.rebalance.enable", True)),
            imbalance_pct=int(cfg.get("leader.imbalance.per.broker.percentage", 10)),
            check_interval_s=float(cfg.get("leader.imbalance.check.interval.seconds", 300)),
            request_timeout_ms=int(cfg.get("controller.socket.timeout.ms", 30_000)),
            retry_backoff_ms=int(cfg.get("retry.backoff.ms", 100)),
            listener=str(cfg.get("inter.broker.listener.name", "PLAINTEXT")),
        )
