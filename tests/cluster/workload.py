"""Real-client load and end checks shared by the cluster acceptance tests.

:class:`Load` runs an idempotent acks=all confluent-kafka producer and an observing consumer on their own threads;
:func:`check_nothing_lost` is the end check of issue 5: every acknowledged message in its partition exactly once
and in order, and nothing a consumer saw later disappeared.
"""

from __future__ import annotations

import datetime
import threading
from collections import defaultdict
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from brokers import wait_for
from kafka_clients import opened
from odradek.admin import CREATE_TOPICS, create_topic, metadata, request_schema
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode


class Load:
    def __init__(self, bootstrap: str, topic: str, partitions: int, extra: dict[str, Any] | None = None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[tuple[int, int], bytes] = {}
        self.seen: dict[tuple[int, int], bytes] = {}
        self.delivery_errors: list[str] = []
        self.client_errors: list[KafkaError] = []
        self.stop = threading.Event()
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2,
            "message.timeout.ms": 120000, "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": self.client_errors.append,
        }
        config.update(extra or {})
        self.producer = opened(Producer(config))
        self.consumer = opened(Consumer({
            "bootstrap.servers": bootstrap, "group.id": "observer", "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }))
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.threads = [threading.Thread(target=self._produce), threading.Thread(target=self._consume)]
        for t in self.threads:
            t.start()

    def _produce(self) -> None:
        seq = 0

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self.delivery_errors.append(str(err))
            else:
                self.acked[(msg.partition(), msg.offset())] = msg.value()

        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, key=str(seq % 31).encode(), value=b"%010d" % seq,
                                      on_delivery=on_delivery)
                seq += 1
            except BufferError:
                pass
            self.producer.poll(0.001 if seq % 20 == 0 else 0)
        self.producer.flush(120)

    def _consume(self) -> None:
        while not self.stop.is_set():
            for m in self.consumer.consume(500, 0.2):
                if m.error() is None:
                    self.seen[(m.partition(), m.offset())] = m.value()
        self.consumer.close()

    def progress(self, more: int, timeout: float = 90) -> None:
        target = len(self.acked) + more
        wait_for(lambda: len(self.acked) >= target, timeout, what=f"{more} more acknowledged messages")

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(180)

    def fatal_errors(self) -> list[KafkaError]:
        return [e for e in self.client_errors if e.fatal() or (not e.retriable() and e.code() not in _TRANSIENT)]


# librdkafka reports these through error_cb as non-retriable although they only say a broker went away and came back
_TRANSIENT = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}


def read_back(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "final", "enable.auto.commit": False}))
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[tuple[int, int], bytes] = {}

    def drained() -> bool:
        for m in consumer.consume(2000, 0.5):
            if m.error() is None:
                out[(m.partition(), m.offset())] = m.value()
        return all(sum(1 for (p, _o) in out if p == q) >= ends[q] for q in ends)

    wait_for(drained, 120, what="reading every partition to its end")
    consumer.close()
    return out


def check_nothing_lost(load: Load, final: dict[tuple[int, int], bytes]) -> None:
    assert not load.delivery_errors, load.delivery_errors[:5]
    for key, value in load.acked.items():
        assert final.get(key) == value, f"acknowledged {value!r} at {key} is gone or moved"
    for key, value in load.seen.items():
        assert final.get(key) == value, f"a consumer saw {value!r} at {key}, which later disappeared"
    per_partition: dict[int, list[int]] = defaultdict(list)
    for (p, _o), v in sorted(final.items()):
        per_partition[p].append(int(v))
    for p, values in per_partition.items():
        assert len(values) == len(set(values)), f"partition {p} holds a duplicate"
        assert values == sorted(values), f"partition {p} is out of order"


def create_replicated_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """The acceptance tests' topic shape: RF 3 with min.insync.replicas=2, created through CreateTopics."""
    with KafkaConnection(bootstrap) as conn:
        error, message = create_topic(conn, topic, partitions, 3, {"min.insync.replicas": "2"})
    assert error == ErrorCode.none, message


def create_topic_with_assignment(
    bootstrap: str, topic: str, assignment: dict[int, list[int]], configs: dict[str, str] | None = None
) -> None:
    """CreateTopics with a manual replica assignment, so a test knows which brokers hold which partition."""
    with KafkaConnection(bootstrap) as conn:
        version, cls, mod = request_schema(conn, CREATE_TOPICS, 7)
        creatable = mod.CreatableTopic(
            name=topic, num_partitions=-1, replication_factor=-1,
            assignments=tuple(mod.CreatableReplicaAssignment(partition_index=p, broker_ids=tuple(r))
                              for p, r in sorted(assignment.items())),
            configs=tuple(mod.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()),
        )
        request = cls(topics=(creatable,), timeout=datetime.timedelta(seconds=30), validate_only=False)
        result = conn.request(CREATE_TOPICS, request, version).topics[0]
        assert result.error_code == ErrorCode.none, (ErrorCode(result.error_code), result.error_message)


def partition_view(bootstrap: str, topic: str) -> dict[int, Any]:
    """Metadata as clients get it: partition -> (leader, replicas, isr)."""
    with KafkaConnection(bootstrap) as conn:
        response = metadata(conn, [topic])
    t = response.topics[0]
    if t.error_code != ErrorCode.none:
        return {}
    return {p.partition_index: (p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) for p in t.partitions}
