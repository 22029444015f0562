"""Which broker settings each way of starting odradek uses, and the one start-up line that names them.

``odradek up`` is the quickstart cluster: it takes the values Kafka ships in its own ``config/server.properties``
(Kafka 3.9) wherever they differ from Kafka's code defaults, since that file is what a person running Kafka
locally actually meets. ``odradek broker`` is the production shape and keeps the code defaults. ``--override``
wins over both.

The lines of Kafka 3.9's file, and what becomes of each here:

- ``group.initial.rebalance.delay.ms=0`` (code default 3000): taken, so a new group's first join is not held back.
- ``offsets.topic.replication.factor=1``, ``transaction.state.log.replication.factor=1`` (code default 3): taken
  for one broker; the file is written for a single broker, so a cluster of N brokers gets ``min(3, N)``, so that
  the tour's broker kill does not take the group and transaction coordinators' only replica with it.
- ``transaction.state.log.min.isr=1`` (code default 2): taken where the transaction log has fewer than three
  replicas; with three, the code default 2 stays, so a committed transaction survives one broker's death.
- ``broker.id=0``, ``num.partitions=1``, ``socket.request.max.bytes=104857600``, ``log.retention.hours=168``,
  ``log.retention.check.interval.ms=300000``, ``num.network.threads=3``, ``num.io.threads=8``,
  ``socket.send.buffer.bytes=102400``, ``socket.receive.buffer.bytes=102400``,
  ``num.recovery.threads.per.data.dir=1``: equal to the code defaults, nothing to take.
- ``log.dirs=/tmp/kafka-logs``, ``zookeeper.connect=localhost:2181``, ``zookeeper.connection.timeout.ms=18000``:
  where data and ZooKeeper live; ``--data-dir`` and the embedded store answer these for ``odradek up``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from odradek.broker.config import SENSITIVE

log = logging.getLogger(__name__)

QUICKSTART_SOURCE = "Kafka 3.9's config/server.properties"

_REPLICATION_FACTORS = ("offsets.topic.replication.factor", "transaction.state.log.replication.factor")


def quickstart_settings(brokers: int) -> dict[str, str]:
    """The quickstart values for a cluster of ``brokers`` (see the module docstring for each one's reason)."""
    replication = min(3, max(brokers, 1))
    settings = {"group.initial.rebalance.delay.ms": "0"}
    if replication < 3:
        settings["transaction.state.log.min.isr"] = "1"
    for name in _REPLICATION_FACTORS:
        settings[name] = str(replication)
    return settings


def describe_settings(base: str, chosen: Mapping[str, str], overrides: Mapping[str, str]) -> str:
    """One line naming where the settings come from, the values taken from there, and the overrides (secrets
    masked, as Kafka masks password configs when it logs its config)."""
    parts = [f"{name}={value}" for name, value in sorted(chosen.items()) if name not in overrides]
    text = f"broker settings: {base}"
    if parts:
        text += f" ({', '.join(parts)})"
    if overrides:
        shown = (f"{name}={'[hidden]' if _secret(name) else value}" for name, value in sorted(overrides.items()))
        text += "; --override " + ", ".join(shown)
    return text


def _secret(name: str) -> bool:
    return name in SENSITIVE or "password" in name or name.endswith("jaas.config")


def up_settings(brokers: int, overrides: Mapping[str, str]) -> dict[str, str]:
    """``odradek up``'s settings: the quickstart values under ``overrides``; logs the start-up line."""
    chosen = quickstart_settings(brokers)
    log.info("%s", describe_settings(f"Kafka's code defaults, then {QUICKSTART_SOURCE}", chosen, overrides))
    return {**chosen, **overrides}


def log_broker_settings(overrides: Mapping[str, str]) -> None:
    """``odradek broker``'s start-up line: Kafka's code defaults and the overrides."""
    log.info("%s", describe_settings("Kafka's code defaults", {}, overrides))
