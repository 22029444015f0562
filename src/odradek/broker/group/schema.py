"""The record formats of ``__consumer_offsets``, byte-for-byte Kafka's, and the group → partition mapping.

Kafka's tools (``kafka-dump-log --offsets-decoder``, ``kafka-consumer-groups``) and a Kafka broker reading our
data directory must understand what we write, so keys and values follow Kafka's generated message schemas
exactly:

* key version 0/1 — OffsetCommitKey ``{group, topic, partition}``; key version 2 — GroupMetadataKey
  ``{group}``
* OffsetCommitValue: we write v3 ``{offset, leader_epoch, metadata, commit_timestamp}``; v0-v3 are read back
* GroupMetadataValue: we write v3; v0-v3 are read back (v1 added rebalance_timeout, v2
  current_state_timestamp, v3 group_instance_id)

All of these versions are non-flexible: int16-length strings, int32-length bytes and arrays. A null value is a
tombstone: compaction then forgets the key.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.placement.java import coordinator_partition

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3


def java_string_hashcode(s: str) -> int:
    """``String.hashCode()`` as Java computes it: over UTF-16 code units, wrapping at 32 bits (signed)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds ``group_id``: Kafka's ``Utils.abs(hashCode) % n``."""
    return coordinator_partition(group_id, num_partitions)


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None
    """Only OffsetCommitValue v1 carried one; kept when reading old data so such offsets still expire."""


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


class SchemaError(ValueError):
    """A record of ``__consumer_offsets`` that is not one of the versions above."""


# --- writing ------------------------------------------------------------------------------------------------


def _string(out: bytearray, s: str | None) -> None:
    if s is None:
        out += _I16.pack(-1)
        return
    raw = s.encode()
    out += _I16.pack(len(raw))
    out += raw


def _bytes(out: bytearray, b: bytes) -> None:
    out += _I32.pack(len(b))
    out += b


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    out = bytearray()
    if isinstance(key, OffsetKey):
        out += _I16.pack(OFFSET_KEY_VERSION)
        _string(out, key.group)
        _string(out, key.topic)
        out += _I32.pack(key.partition)
    else:
        out += _I16.pack(GROUP_KEY_VERSION)
        _string(out, key.group)
    return bytes(out)


def encode_offset_value(value: OffsetValue) -> bytes:
    out = bytearray(_I16.pack(OFFSET_VALUE_VERSION))
    out += _I64.pack(value.offset)
    out += _I32.pack(value.leader_epoch)
    _string(out, value.metadata)
    out += _I64.pack(value.commit_timestamp)
    return bytes(out)


def encode_group_value(value: GroupValue) -> bytes:
    out = bytearray(_I16.pack(GROUP_VALUE_VERSION))
    _string(out, value.protocol_type)
    out += _I32.pack(value.generation)
    _string(out, value.protocol)
    _string(out, value.leader)
    out += _I64.pack(value.current_state_timestamp)
    out += _I32.pack(len(value.members))
    for m in value.members:
        _string(out, m.member_id)
        _string(out, m.group_instance_id)
        _string(out, m.client_id)
        _string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout)
        out += _I32.pack(m.session_timeout)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# --- reading ------------------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.buf):
            raise SchemaError("record ends early")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return int(v)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def nullable_string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        if self.pos + n > len(self.buf):
            raise SchemaError("string runs past the record")
        s = self.buf[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise SchemaError("null where a string is required")
        return s

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        if self.pos + n > len(self.buf):
            raise SchemaError("bytes run past the record")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b


def decode_key(raw: bytes) -> OffsetKey | GroupKey:
    r = _Reader(raw)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupKey(r.string())
    raise SchemaError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(raw: bytes) -> OffsetValue:
    r = _Reader(raw)
    version = r.i16()
    if version == 0:
        offset, metadata, ts = r.i64(), r.string(), r.i64()
        return OffsetValue(offset, -1, metadata, ts)
    if version == 1:
        offset, metadata, ts, expire = r.i64(), r.string(), r.i64(), r.i64()
        return OffsetValue(offset, -1, metadata, ts, expire)
    if version == 2:
        offset, metadata, ts = r.i64(), r.string(), r.i64()
        return OffsetValue(offset, -1, metadata, ts)
    if version == 3:
        offset, epoch, metadata, ts = r.i64(), r.i32(), r.string(), r.i64()
        return OffsetValue(offset, epoch, metadata, ts)
    raise SchemaError(f"unsupported OffsetCommitValue version {version}")


def decode_group_value(raw: bytes) -> GroupValue:
    r = _Reader(raw)
    version = r.i16()
    if not 0 <= version <= 3:
        raise SchemaError(f"unsupported GroupMetadataValue version {version}")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    state_ts = r.i64() if version >= 2 else -1
    members: list[MemberValue] = []
    for _ in range(max(r.i32(), 0)):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if version == 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberValue(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                r.bytes_(),
                r.bytes_(),
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, state_ts, members)
