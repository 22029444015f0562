"""A minimal Kafka Fetch client: one socket to one partition leader, raw record bytes out.

Why our own: librdkafka hands records to Python one ``Message`` object at a time, and the per-object cost
alone caps a Spark task well below a million rows per second. Fetch (non-flexible versions 4-11,
negotiated through ApiVersions v0) returns each partition's RecordBatches as one byte string that
``recordbatch`` decodes in bulk. Only PLAINTEXT listeners are spoken here; everything else about the
cluster (metadata, offsets by time) goes through confluent-kafka on the driver.

Framing (headers, size prefix, correlation ids) is :class:`odradek.protocol.client.BlockingConnection`'s, shared
with every odradek client; that module and :mod:`odradek.protocol.wire` import only the standard library, so the
Spark source still needs neither the broker nor kio.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.protocol.client import BlockingConnection

API_FETCH = 1
API_VERSIONS = 18
FETCH_MIN_VERSION = 4
FETCH_MAX_VERSION = 11



class KafkaProtocolError(RuntimeError):
    """The broker answered something this client cannot use."""


@dataclass(frozen=True, slots=True)
class PartitionData:
    """One partition's part of a Fetch response; ``records`` is the raw RecordBatch bytes.

    ``aborted`` is the (producer_id, first_offset) list a read_committed Fetch returns for the range.
    """

    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview
    last_stable_offset: int = -1
    aborted: tuple[tuple[int, int], ...] = ()


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


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def encode_fetch(
    version: int,
    topic: str,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int,
    max_bytes: int,
    isolation_level: int = 0,
) -> bytes:
    """A Fetch request body for a single partition."""
    parts = [struct.pack(">iiiib", -1, max_wait_ms, 1, max_bytes, isolation_level)]
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
    return b"".join(parts)


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
            lso = r.i64()
            log_start = r.i64() if version >= 5 else -1
            aborted = tuple((r.i64(), r.i64()) for _ in range(max(r.i32(), 0)))
            if version >= 11:
                r.i32()  # preferred read replica
            records = r.nbytes()
            if name == topic and index == partition:
                return PartitionData(error, hw, log_start, records, lso, aborted)
    raise KafkaProtocolError(f"fetch response lacks {topic}-{partition}")


class FetchConnection:
    """A blocking connection to one broker that can keep one Fetch in flight while the caller decodes."""

    def __init__(self, host: str, port: int, *, timeout_s: float, client_id: str = "odradek-spark") -> None:
        self._conn = BlockingConnection(host, port, client_id, timeout=timeout_s)
        self._pending: list[int] = []
        self.version = self._negotiate()

    def close(self) -> None:
        self._conn.close()

    def _negotiate(self) -> int:
        frame, offset = self._conn.request(API_VERSIONS, 0, b"", flexible_request=False, flexible_response=False)
        r = _Reader(frame[offset:])
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
        body = encode_fetch(self.version, topic, partition, offset, max_wait_ms=max_wait_ms, max_bytes=max_bytes,
                            isolation_level=isolation_level)
        self._pending.append(self._conn.send(API_FETCH, self.version, body, flexible=False))

    def receive_fetch(self, topic: str, partition: int) -> PartitionData:
        frame, offset = self._conn.receive(self._pending.pop(0), flexible=False)
        return decode_fetch(self.version, frame[offset:], topic, partition)
