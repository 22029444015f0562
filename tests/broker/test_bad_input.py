"""Bad input over a real socket: each gets a Kafka error code or a closed connection, and the broker keeps serving."""

from __future__ import annotations

import socket
import struct

from kio.index import load_request_schema

from brokers import BrokerProcess, peer_closed, raw_socket, wait_for
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.records import encode_batch


def _still_serves(broker: BrokerProcess) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        assert 0 in conn.versions and 1 in conn.versions


def test_oversized_request_closes_connection_with_log_line(broker_factory) -> None:
    broker = broker_factory("--override", "socket.request.max.bytes=1000")
    sock = raw_socket(broker)
    sock.sendall(struct.pack(">i", 5000) + b"\x00" * 16)
    assert peer_closed(sock)
    wait_for(lambda: "exceeds socket.request.max.bytes=1000" in broker.log_text(), what="oversize log line")
    _still_serves(broker)


def test_unknown_api_key_and_version_close_only_that_connection(broker: BrokerProcess) -> None:
    for key, version in ((999, 0), (0, 99), (-1, 0)):
        sock = raw_socket(broker)
        payload = struct.pack(">hhi", key, version, 7) + b"\x00\x00"
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        assert peer_closed(sock)
    log = broker.log_text()
    assert "unknown API key 999" in log
    assert "unsupported version 99 of API 0" in log
    _still_serves(broker)


def test_truncated_frame_and_vanishing_client(broker: BrokerProcess) -> None:
    sock = raw_socket(broker)
    sock.sendall(struct.pack(">i", 100) + b"\x00\x12\x00")  # promises 100 bytes, sends 3, then vanishes
    sock.close()
    sock = raw_socket(broker)
    sock.sendall(b"\x00\x00")  # half a size prefix
    sock.close()
    wait_for(lambda: "closed mid-request" in broker.log_text(), what="mid-request log line")
    _still_serves(broker)


def test_garbage_body_closes_connection(broker: BrokerProcess) -> None:
    sock = raw_socket(broker)
    payload = struct.pack(">hhi", 3, 12, 1) + b"\xff" * 9  # Metadata v12 header with garbage after it
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    assert peer_closed(sock)
    _still_serves(broker)


def test_a_length_the_frame_cannot_hold_closes_the_connection_and_the_broker_lives(broker: BrokerProcess) -> None:
    """kio's native reader allocates an array's declared capacity first: without the length check ahead of it, a
    frame claiming two billion topics aborted the broker process."""
    for version, claim in ((1, struct.pack(">i", 0x7FFFFFFF)), (12, b"\xff\xff\xff\xff\x0f")):
        sock = raw_socket(broker)
        header = struct.pack(">hhih", 3, version, 5, -1) + (b"\x00" if version >= 9 else b"")
        payload = header + claim  # Metadata: "this many topics follow", and nothing follows
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        assert peer_closed(sock)
    assert broker.proc is not None and broker.proc.poll() is None, "the broker died"
    wait_for(lambda: "array of 2147483647 elements" in broker.log_text(), what="the refusal's log line")
    _still_serves(broker)


def test_api_versions_too_new_gets_kip511_fallback(broker: BrokerProcess) -> None:
    sock = raw_socket(broker)
    payload = struct.pack(">hhi", 18, 99, 42) + b"\x00\x00"
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
    body = sock.recv(size, socket.MSG_WAITALL)
    correlation, error = struct.unpack(">ih", body[:6])
    assert correlation == 42
    assert error == ErrorCode.unsupported_version
    # ApiVersions' own range alone, as Kafka answers (differential: api-versions.v99.unsupported)
    count, key, low, high = struct.unpack(">ihhh", body[6:16])
    assert (count, key, low) == (1, 18, 0) and high >= 3


def _produce(conn: KafkaConnection, topic: str, records: bytes) -> object:
    import datetime

    cls = load_request_schema(0, 9)
    mod = __import__(cls.__module__, fromlist=["x"])
    request = cls(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5),
        topic_data=(
            mod.TopicProduceData(name=topic, partition_data=(mod.PartitionProduceData(index=0, records=records),)),
        ),
    )
    return conn.request(0, request, 9).responses[0].partition_responses[0]


def test_corrupt_batches_get_kafka_error_codes(broker: BrokerProcess) -> None:
    from odradek.admin import create_topic

    with KafkaConnection(broker.bootstrap) as conn:
        assert create_topic(conn, "bad", 1, 1, {})[0] == ErrorCode.none
        good = encode_batch([(b"k", b"v", [])], timestamp_ms=1)
        bad_crc = bytearray(good)
        bad_crc[-1] ^= 0xFF
        assert _produce(conn, "bad", bytes(bad_crc)).error_code == ErrorCode.corrupt_message
        # not exactly one whole magic-2 batch: Kafka's ProduceRequest.validateRecords answers INVALID_RECORD (the
        # differential corpus compares these with Kafka 3.9: produce.v9.truncated-batch, magic-1-batch, ...)
        truncated = bytes(good[:-3])
        assert _produce(conn, "bad", truncated).error_code == ErrorCode.invalid_record
        bad_magic = bytearray(good)
        bad_magic[16] = 1
        assert _produce(conn, "bad", bytes(bad_magic)).error_code == ErrorCode.invalid_record
        assert _produce(conn, "bad", b"").error_code == ErrorCode.invalid_record
        ok = _produce(conn, "bad", bytes(good))
        assert ok.error_code == ErrorCode.none and ok.base_offset == 0
        again = _produce(conn, "bad", bytes(good))
        assert again.base_offset == 1, "nothing from the refused batches may have reached the log"
