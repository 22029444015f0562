"""Cluster look-ups through confluent-kafka's AdminClient: partitions, leaders, offsets, offsets by time.

These calls are few per micro-batch and happen on the driver (and on executors only when a leader moved
or data vanished), so librdkafka's speed and robustness matter more here than anything a hand-written
client could add.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from odradek.spark.options import Subscription, TopicPartition

Address = tuple[str, int]
RETRY_S = 15.0
RETRY_BACKOFF_S = 0.25
# Errors Kafka's Java client retries (InvalidMetadataException and friends) but librdkafka does not mark retriable
_MOVING = {
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
}


class Cluster:
    """A lazily connected admin handle; not picklable on purpose, build one where it is used."""

    def __init__(self, config: Mapping[str, str], *, timeout_s: float = 30.0, read_committed: bool = False) -> None:
        self._config: dict[str, Any] = dict(config)
        self._timeout = timeout_s
        self._admin: Any = None
        self._isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED

    @property
    def admin(self) -> Any:
        if self._admin is None:
            self._admin = AdminClient(dict[str, Any](self._config))
        return self._admin

    def partitions(self, subscription: Subscription) -> dict[TopicPartition, Address | None]:
        """The partitions the subscription covers right now, with each one's leader address."""
        metadata = self.admin.list_topics(timeout=self._timeout)
        brokers = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
        out: dict[TopicPartition, Address | None] = {}
        wanted_assign = set(subscription.assign)
        for name, topic in metadata.topics.items():
            if topic.error is not None or not subscription.matches(name):
                continue
            if subscription.pattern is not None and name.startswith("__"):
                continue  # internal topics are never matched by a pattern, as in Kafka's consumer
            for pid, part in topic.partitions.items():
                if wanted_assign and (name, pid) not in wanted_assign:
                    continue
                out[(name, pid)] = brokers.get(part.leader)
        return out

    def leader(self, tp: TopicPartition) -> Address | None:
        """Where to fetch ``tp`` from now; None while the partition has no leader (or does not exist)."""
        metadata = self.admin.list_topics(topic=tp[0], timeout=self._timeout)
        topic = metadata.topics.get(tp[0])
        if topic is None or topic.error is not None or tp[1] not in topic.partitions:
            return None
        broker = metadata.brokers.get(topic.partitions[tp[1]].leader)
        return (broker.host, broker.port) if broker is not None else None

    def _list(self, specs: Mapping[TopicPartition, Any]) -> dict[TopicPartition, int]:
        """ListOffsets, retried while the answer is a retriable error (a leader moving, a broker restarting).

        A broker that has just restarted, or a partition between leaders, answers with errors Kafka marks
        retriable; failing the micro-batch for them would stop a streaming query at every broker bounce.
        """
        if not specs:
            return {}
        request = {KafkaTopicPartition(t, p): spec for (t, p), spec in specs.items()}
        deadline = time.monotonic() + min(self._timeout, RETRY_S)
        while True:
            futures = self.admin.list_offsets(request, isolation_level=self._isolation, request_timeout=self._timeout)
            try:
                return {(tp.topic, tp.partition): fut.result().offset for tp, fut in futures.items()}
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                retriable = error is not None and (error.retriable() or error.code() in _MOVING)
                if not retriable or time.monotonic() > deadline:
                    raise
                time.sleep(RETRY_BACKOFF_S)

    def earliest(self, partitions: list[TopicPartition] | set[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list({tp: OffsetSpec.earliest() for tp in partitions})

    def latest(self, partitions: list[TopicPartition] | set[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks: reads stop here, never at uncommitted (unreplicated) records. Under read_committed,
        last stable offsets: nothing of a transaction still open is planned into a batch."""
        return self._list({tp: OffsetSpec.latest() for tp in partitions})

    def latest_not_before(self, partitions: list[TopicPartition], known: Mapping[TopicPartition, int]
                          ) -> dict[TopicPartition, int]:
        """High watermarks, asked again while one is below an offset already read from that partition.

        A leader elected a moment ago may still hold a lower high watermark than its predecessor exposed (brokers
        before KIP-207 answer it; Spark's own Kafka source retries for the same reason, KAFKA-7703). Only when it
        stays behind past the retry window is the answer returned as it is, for planning to report as data loss.
        """
        deadline = time.monotonic() + min(self._timeout, RETRY_S)
        while True:
            latest = self.latest(partitions)
            behind = [tp for tp in partitions if tp in known and latest[tp] < known[tp]]
            if not behind or time.monotonic() > deadline:
                return latest
            time.sleep(RETRY_BACKOFF_S)

    def offsets_for_times(self, wanted: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """First offset whose timestamp is >= the given one, -1 where there is none."""
        return self._list({tp: OffsetSpec.for_timestamp(ts) for tp, ts in wanted.items()})

    def ensure_topic(self, topic: str, partitions: int = 1) -> None:
        """Create a topic if it is missing, replicated as widely as the cluster allows (up to 3).

        With three replicas it also gets ``min.insync.replicas=2``, so an acks=all write survives one broker's
        death and is never acknowledged by a lone leader. A topic that already exists is left as it is.
        """
        metadata = self.admin.list_topics(timeout=self._timeout)
        existing = metadata.topics.get(topic)
        if existing is not None and existing.error is None:
            return
        replication = max(1, min(3, len(metadata.brokers)))
        config = {"min.insync.replicas": "2"} if replication == 3 else {}
        futures = self.admin.create_topics(
            [NewTopic(topic, partitions, replication, config=config)], request_timeout=self._timeout
        )
        for future in futures.values():
            try:
                future.result()
            except Exception as exc:  # a concurrent creator won the race: that is fine
                if "TOPIC_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
                    raise
