"""A minimal Kafka Fetch client: one socket to one partition leader, raw record bytes out.

Why our own: librdkafka hands records to Python one ``Message`` object at a time, and the per-object cost
alone caps a Spark task well below a million rows per second. Fetch (non-flexible versions 4-11,
negotiated through ApiVersions v0) returns each partition's RecordBatches as one byte string that
``recordbatch`` decodes in bulk. Only PLAINTEXT listeners are spoken here; everything else about the
cluster (metadata, offsets by time) goes through confluent-kafka on the driver.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

API_FETCH = 1
API_VERSIONS = 18
FETCH_MIN_VERSION = 4
FETCH_MAX_VERSION = 11

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")


class KafkaProtocolError(RuntimeError):
    """The broker answered something this client cannot use."""


@dataclass(frozen=True, slots=True)
class PartitionData:
    """One partition's part of a Fetch response; ``records`` is the raw RecordBatch bytes."""

    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview


class _Reader:
    """Cursor over a response body; big-endian fixed-width reads as Kafka's non-flexible versions use."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, fmt: struct.Struct) -> tuple[int, ...]:
        values = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return values

    def i16(self) -> int:
        return self.take(_I16)[0]

    def i32(self) -> int:
        return self.take(_I32)[0]

    def i64(self) -> int:
        return self.take(_I64)[0]

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            return ""
        s = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def nbytes(self) -> memoryview:
        n = self.i32()
        if n < 0:
            return memoryview(b"")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    raw = s.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def encode_fetch(
    version: int,
    correlation_id: int,
    client_id: str,
    topic: str,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int,
    max_bytes: int,
    isolation_level: int = 0,
) -> bytes:
    """A Fetch request for a single partition, framed with its size prefix."""
    parts = [
        _HEADER.pack(API_FETCH, version, correlation_id),
        _string(client_id),
        struct.pack(">iiiib", -1, max_wait_ms, 1, max_bytes, isolation_level),
    ]
    if version >= 7:
        parts.append(struct.pack(">ii", 0, -1))  # no fetch session: full fetch every time
    parts.append(_I32.pack(1) + _string(topic) + _I32.pack(1) + _I32.pack(partition))
    if version >= 9:
        parts.append(_I32.pack(-1))  # current leader epoch unknown
    parts.append(_I64.pack(offset))
    if version >= 5:
        parts.append(_I64.pack(-1))
    parts.append(_I32.pack(max_bytes))
    if version >= 7:
        parts.append(_I32.pack(0))  # forgotten topics
    if version >= 11:
        parts.append(_string(""))
    body = b"".join(parts)
    return _SIZE.pack(len(body)) + body


def decode_fetch(version: int, body: memoryview, topic: str, partition: int) -> PartitionData:
    """Pick our partition out of a Fetch response body (correlation id already stripped)."""
    r = _Reader(body)
    r.i32()  # throttle time
    if version >= 7:
        top_error = r.i16()
        r.i32()  # session id
        if top_error:
            return PartitionData(top_error, -1, -1, memoryview(b""))
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            (index,) = r.take(_I32)
            error = r.i16()
            hw = r.i64()
            r.i64()  # last stable offset
            log_start = r.i64() if version >= 5 else -1
            aborted = r.i32()
            for _ in range(max(aborted, 0)):
                r.i64()
                r.i64()
            if version >= 11:
                r.i32()  # preferred read replica
            records = r.nbytes()
            if name == topic and index == partition:
                return PartitionData(error, hw, log_start, records)
    raise KafkaProtocolError(f"fetch response lacks {topic}-{partition}")


class FetchConnection:
    """A blocking connection to one broker that can keep one Fetch in flight while the caller decodes."""

    def __init__(self, host: str, port: int, *, timeout_s: float, client_id: str = "odradek-spark") -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client_id = client_id
        self._correlation = 0
        self._pending: list[int] = []
        self.version = self._negotiate()

    def close(self) -> None:
        self._sock.close()

    def _next_id(self) -> int:
        self._correlation += 1
        return self._correlation

    def _recv_exact(self, n: int) -> memoryview:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            chunk = self._sock.recv_into(view[got:], n - got)
            if chunk == 0:
                raise ConnectionError("broker closed the connection")
            got += chunk
        return view

    def _recv_response(self, correlation_id: int) -> memoryview:
        (size,) = _SIZE.unpack(self._recv_exact(4))
        body = self._recv_exact(size)
        (got,) = _I32.unpack_from(body, 0)
        if got != correlation_id:
            raise KafkaProtocolError(f"correlation id {got}, expected {correlation_id}")
        return body[4:]

    def _negotiate(self) -> int:
        cid = self._next_id()
        body = _HEADER.pack(API_VERSIONS, 0, cid) + _string(self._client_id)
        self._sock.sendall(_SIZE.pack(len(body)) + body)
        r = _Reader(self._recv_response(cid))
        error = r.i16()
        if error:
            raise KafkaProtocolError(f"ApiVersions failed with error {error}")
        for _ in range(r.i32()):
            key, low, high = r.take(struct.Struct(">hhh"))
            if key == API_FETCH:
                version = min(high, FETCH_MAX_VERSION)
                if version < max(low, FETCH_MIN_VERSION):
                    raise KafkaProtocolError(f"broker offers Fetch {low}-{high}; this client speaks 4-11")
                return version
        raise KafkaProtocolError("broker does not offer Fetch")

    def send_fetch(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_wait_ms: int,
        max_bytes: int,
        isolation_level: int = 0,
    ) -> None:
        """Queue a Fetch; its answer comes from the next ``receive_fetch`` (answers arrive in order)."""
        cid = self._next_id()
        request = encode_fetch(
            self.version,
            cid,
            self._client_id,
            topic,
            partition,
            offset,
            max_wait_ms=max_wait_ms,
            max_bytes=max_bytes,
            isolation_level=isolation_level,
        )
        self._sock.sendall(request)
        self._pending.append(cid)

    def receive_fetch(self, topic: str, partition: int) -> PartitionData:
        cid = self._pending.pop(0)
        return decode_fetch(self.version, self._recv_response(cid), topic, partition)
