"""The transaction coordinator's settings, under Kafka's names (``transaction.*``) and with Kafka's defaults.

They live in :class:`odradek.broker.config.BrokerConfig` like every broker setting (so ``--override`` sets them); this
is the typed slice the coordinator reads, built once at start-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TRANSACTION_STATE_TOPIC = "__transaction_state"


@dataclass(frozen=True, slots=True)
class TxnConfig:
    num_partitions: int = 50
    """``transaction.state.log.num.partitions``: fixed once the topic exists (ids hash onto it)."""
    max_timeout_ms: int = 900_000
    """``transaction.max.timeout.ms``: a client asking for more gets INVALID_TRANSACTION_TIMEOUT."""
    abort_timed_out_interval_ms: int = 10_000
    """``transaction.abort.timed.out.transaction.cleanup.interval.ms``: how often hung transactions are looked for."""
    id_expiration_ms: int = 604_800_000
    """``transactional.id.expiration.ms``: an id idle (no transaction) this long is forgotten (tombstoned)."""
    remove_expired_interval_ms: int = 3_600_000
    """``transaction.remove.expired.transaction.cleanup.interval.ms``: how often idle ids are looked for."""
    request_timeout_ms: int = 30_000
    """``request.timeout.ms``: how long a marker write or a broker-to-broker request may take."""

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> TxnConfig:
        def get(name: str, default: int) -> int:
            return int(values.get(name, default))

        return cls(
            num_partitions=get("transaction.state.log.num.partitions", 50),
            max_timeout_ms=get("transaction.max.timeout.ms", 900_000),
            abort_timed_out_interval_ms=get("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000),
            id_expiration_ms=get("transactional.id.expiration.ms", 604_800_000),
            remove_expired_interval_ms=get("transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000),
            request_timeout_ms=get("request.timeout.ms", 30_000),
        )
