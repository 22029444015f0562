"""A connection reads the next Produce while an acks=all one waits for replication (issue 11): appends stay in
request order and responses leave in order, so an idempotent producer with five requests in flight sees no
sequence error, and every record arrives once, in order."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import wait_for

TOPIC = "pipelined"
COUNT = 3000


def test_pipelined_acks_all_produces_keep_their_order_and_all_arrive_once(cluster_factory) -> None:
    c = cluster_factory(3)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    wait_for(lambda: c.full_isr(TOPIC, 1), 30, what="a full ISR")
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                         "max.in.flight.requests.per.connection": 5, "linger.ms": 0, "batch.num.messages": 7})
    errors: list[object] = []
    acked: list[int] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked.append(msg.offset())  # type: ignore[attr-defined]

    for i in range(COUNT):
        producer.produce(TOPIC, str(i).encode(), on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []
    assert acked == sorted(acked) and len(set(acked)) == COUNT, "acknowledged offsets are unique and in order"

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "pipe", "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    seen: list[int] = []
    try:
        wait_for(lambda: _drain(consumer, seen) >= COUNT, 60, what="every record consumed")
    finally:
        consumer.close()
    assert seen == list(range(COUNT))


def _drain(consumer: Consumer, seen: list[int]) -> int:
    for m in consumer.consume(500, 0.5):
        if not m.error():
            seen.append(int(m.value()))
    return len(seen)
