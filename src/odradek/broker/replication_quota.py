"""The leader's replication throttle (KIP-73), as Kafka's ReplicationQuotaManager applies it: pure, time passed in.

A reassignment's ``--throttle`` sets ``leader.replication.throttled.rate`` (bytes per second, a dynamic broker
config) and, on each moving topic, ``leader.replication.throttled.replicas``: ``partition:broker`` pairs (or ``*``).
A partition is throttled on this broker when a pair names it with this broker's id. A follower outside the ISR then
gets no records for it while the bytes sent for throttled partitions run above the rate, measured over Kafka's
``replication.quota.window.num`` (11) windows of ``replication.quota.window.size.seconds`` (1); followers in the ISR
are never held back, so the throttle slows a catching-up replica and never the partition's acknowledged writes.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.broker.quota_rate import Rate

WINDOWS, WINDOW_MS = 11, 1000
"""Kafka's replication.quota.window.num and replication.quota.window.size.seconds defaults."""

LEADER_RATE = "leader.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"


def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a ``*.replication.throttled.replicas`` value throttles on ``broker_id`` (None: every one,
    Kafka's ``*``); Kafka's ``parseThrottledPartitions``, which skips what does not parse."""
    text = value.strip()
    if text == "*":
        return None
    out: set[int] = set()
    for pair in text.split(","):
        partition, _, broker = pair.strip().partition(":")
        if partition.strip().isdigit() and broker.strip().lstrip("-").isdigit() and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuota:
    """One broker's leader-side replication quota: which partitions are throttled and the bytes sent for them."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.bound: float | None = None
        """Bytes per second; None when no rate is set (Kafka's Long.MAX_VALUE: never exceeded)."""
        self._rate = Rate(WINDOWS, WINDOW_MS)
        self._topics: dict[str, frozenset[int] | None] = {}
        self.withheld = 0
        """How many times a follower's fetch got no records for a partition because of the throttle."""

    def set_rate(self, value: str | None) -> None:
        """The dynamic ``leader.replication.throttled.rate`` in force (None or Long.MAX_VALUE: unthrottled)."""
        bound = None if value is None else float(int(value))
        self.bound = None if bound is None or bound >= 2**63 - 1 else bound

    def set_topic(self, topic: str, configs: Mapping[str, object]) -> None:
        """A topic's overrides changed: its ``leader.replication.throttled.replicas``, if any."""
        raw = configs.get(LEADER_REPLICAS)
        text = ",".join(raw) if isinstance(raw, tuple) else ("" if raw is None else str(raw))
        if text.strip():
            self._topics[topic] = throttled_partitions(text, self.broker_id)
        else:
            self._topics.pop(topic, None)

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self._topics:
            return False
        partitions = self._topics[topic]
        return partitions is None or partition in partitions

    def exceeded(self, now_ms: int) -> bool:
        return self.bound is not None and self._rate.measure(now_ms) > self.bound

    def record(self, size: int, now_ms: int) -> None:
        """Bytes just sent for throttled partitions (Kafka records them whether or not the quota was exceeded)."""
        if size:
            self._rate.record(size, now_ms)
