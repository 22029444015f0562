"""A connection reads the next Produce while an acks=all one waits for replication (issue 11): appends stay in
request order and responses leave in order, so an idempotent producer with five requests in flight sees no
sequence error, and every record arrives once, in order. Produce requests already buffered on a connection are all
appended before a follower's fetch is answered, so they share replication rounds instead of taking one each."""

from __future__ import annotations

import datetime
import socket
import struct

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema, load_response_schema

from brokers import wait_for
from kafka_clients import opened
from odradek.protocol.entities import decode_entity, encode_entity
from odradek.protocol.records import encode_batch
from odradek.protocol.wire import request_header

FETCH_KEY = 1

TOPIC = "pipelined"
COUNT = 3000


def test_pipelined_acks_all_produces_keep_their_order_and_all_arrive_once(cluster_factory) -> None:
    c = cluster_factory(3)
    admin = opened(AdminClient({"bootstrap.servers": c.bootstrap}))
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    wait_for(lambda: c.full_isr(TOPIC, 1), 30, what="a full ISR")
    producer = opened(Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                                "max.in.flight.requests.per.connection": 5, "linger.ms": 0, "batch.num.messages": 7}))
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

    consumer = opened(Consumer({"bootstrap.servers": c.bootstrap, "group.id": "pipe", "auto.offset.reset": "earliest"}))
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


def test_produces_buffered_on_a_connection_share_replication_rounds(cluster_factory) -> None:
    """Forty acks=all requests written at once: appended one per event-loop turn, they took ~30 rounds (60 follower
    fetches answered on the machine this was written on); appended together, one round (2 fetches) acknowledges them
    all. The count depends on how the bytes arrive, not on how fast anything runs: even split over a few reads it
    stays far below the bound."""
    c = cluster_factory(3)
    admin = opened(AdminClient({"bootstrap.servers": c.bootstrap}))
    admin.create_topics([NewTopic("buffered", 1, 3)])["buffered"].result(30)
    wait_for(lambda: c.full_isr("buffered", 1), 30, what="a full ISR")
    leader = c.broker(c.leader_of("buffered", 0))
    count = 40
    cls = load_request_schema(0, 9)
    mod = __import__(cls.__module__, fromlist=["x"])
    frames = bytearray()
    for i in range(count):
        batch = bytes(encode_batch([(None, str(i).encode(), [])], timestamp_ms=1))
        body = encode_entity(cls(
            transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
            topic_data=(mod.TopicProduceData(name="buffered", partition_data=(
                mod.PartitionProduceData(index=0, records=batch),)),),
        ))
        header = request_header(0, 9, i, "buffered-test", True)
        frames += struct.pack(">i", len(header) + len(body)) + header + body

    def fetches_answered() -> int:
        histogram = leader.stats.requests.get(FETCH_KEY)
        return sum(histogram.counts) if histogram is not None else 0

    before = c.run(fetches_answered)
    response_cls = load_response_schema(0, 9)
    with socket.create_connection((leader.host, leader.port), timeout=60) as sock:
        sock.sendall(frames)
        offsets = []
        for i in range(count):
            (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
            frame = sock.recv(size, socket.MSG_WAITALL)
            assert struct.unpack(">i", frame[:4])[0] == i, "responses leave in request order"
            response = decode_entity(response_cls, frame, 5)  # correlation id, then an empty tag buffer
            part = response.responses[0].partition_responses[0]
            assert part.error_code == 0
            offsets.append(part.base_offset)
    assert offsets == list(range(count))
    answered = c.run(fetches_answered) - before
    assert answered <= count // 4, f"{answered} fetches answered for {count} buffered produces: no shared rounds"
