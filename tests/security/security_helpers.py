"""What the security tests share: the JAAS users, and a raw SASL client for exchanges no real client would send."""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from confluent_kafka import KafkaError, Producer

from brokers import peer_closed
from kafka_clients import opened
from odradek.protocol.entities import decode_entity, encode_entity, entity_schemas
from odradek.protocol.wire import request_header

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


class RawSasl:
    """One socket speaking Kafka frames by hand: SaslHandshake, SaslAuthenticate, Metadata, raw bytes."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self._correlation = 0

    def request(self, api_key: int, version: int, body: Any) -> Any:
        schemas = entity_schemas(api_key, version)
        self._correlation += 1
        header = request_header(api_key, version, self._correlation, "raw-sasl", schemas.flexible_request)
        payload = bytes(header) + bytes(encode_entity(body))
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        frame = self._frame()
        offset = 4 + (1 if schemas.flexible_response else 0)  # correlation id (+ empty tag buffer)
        return decode_entity(schemas.response, memoryview(frame).toreadonly(), offset)

    def _frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)

    def _exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return data

    def handshake(self, mechanism: str, version: int = 1) -> Any:
        return self.request(17, version, entity_schemas(17, version).request(mechanism=mechanism))

    def authenticate(self, token: bytes, version: int = 2) -> Any:
        return self.request(36, version, entity_schemas(36, version).request(auth_bytes=token))

    def raw_token(self, token: bytes) -> bytes:
        """A v0-handshake token: size-prefixed bytes without a Kafka header; the answer likewise."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)
        return self._frame()

    def metadata_brokers(self) -> list[tuple[int, str, int]]:
        request = entity_schemas(3, 12).request(topics=(), allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False)
        return [(int(b.node_id), b.host, int(b.port)) for b in self.request(3, 12, request).brokers]

    def send_raw_metadata(self) -> None:
        """A Metadata v12 request, sent without waiting for an answer."""
        request = entity_schemas(3, 12).request(topics=(), allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False)
        header = request_header(3, 12, 99, "raw-sasl", True)
        payload = bytes(header) + bytes(encode_entity(request))
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def closed_by_peer(self) -> bool:
        return peer_closed(self.sock)

    def ends_after_refusal(self) -> bool:
        """After a refusal's response the broker lingers until the client closes (or its linger runs out): close
        our side, then the broker must close its own."""
        self.sock.shutdown(socket.SHUT_WR)
        return peer_closed(self.sock)


def sasl_connection(address: str) -> RawSasl:
    return RawSasl(address)


def assert_refused(conf: dict[str, object]) -> None:
    """librdkafka reports a refused authentication through the error callback, served by poll."""
    errors: list[KafkaError] = []
    producer = opened(Producer({**conf, "error_cb": errors.append}))
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
