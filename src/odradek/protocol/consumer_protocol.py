"""The embedded consumer protocol (protocol type ``consumer``): what a classic member's JoinGroup metadata and
SyncGroup assignment bytes hold.

The classic coordinator never needs to read them, but a consumer group that serves classic members does: it
takes their subscription (and the partitions they say they own) from the metadata, and hands them the partitions
the server-side assignor gave them as an assignment in the version their metadata used (Kafka's ConsumerProtocol).
The schema registry reads the assignments DescribeGroups returns, to find which member holds ``_schemas``.

ConsumerProtocolSubscription: int16 version, topics ``[string]``, user data ``nullable bytes``, v1+ owned
partitions ``[(string, [int32])]``, v2+ generation ``int32``, v3+ rack ``nullable string``.
ConsumerProtocolAssignment: int16 version, partitions ``[(string, [int32])]``, user data ``nullable bytes``.
Both are non-flexible and a newer version only appends fields, so a reader ignores what follows what it knows.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

PROTOCOL_TYPE = "consumer"
MAX_ASSIGNMENT_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerProtocolError(ValueError):
    """The bytes are not a readable ConsumerProtocol message."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]] = field(default_factory=dict)
    rack_id: str | None = None


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ConsumerProtocolError("consumer protocol message ends early")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError(f"bad string: {exc}") from None

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def partitions(self) -> dict[str, frozenset[int]]:
        out: dict[str, frozenset[int]] = {}
        for _ in range(max(self.i32(), 0)):
            topic = self.string() or ""
            out[topic] = frozenset(self.i32() for _ in range(max(self.i32(), 0)))
        return out


def version_of(raw: bytes) -> int:
    if len(raw) < 2:
        raise ConsumerProtocolError("consumer protocol message has no version")
    return int(_I16.unpack_from(raw)[0])


def decode_subscription(raw: bytes) -> Subscription:
    r = _Reader(bytes(raw))
    version = r.i16()
    if version < 0:
        raise ConsumerProtocolError(f"subscription version {version}")
    topics = tuple(r.string() or "" for _ in range(max(r.i32(), 0)))
    r.nbytes()
    owned: dict[str, frozenset[int]] = {}
    rack: str | None = None
    if version >= 1 and not r.at_end():
        owned = r.partitions()
    if version >= 2 and not r.at_end():
        r.i32()
    if version >= 3 and not r.at_end():
        rack = r.string()
    return Subscription(version, topics, owned, rack)


def decode_assignment(raw: bytes) -> dict[str, frozenset[int]]:
    """An empty assignment (a member that has not synced yet) assigns nothing."""
    if not raw:
        return {}
    r = _Reader(bytes(raw))
    if r.i16() < 0:
        raise ConsumerProtocolError("negative assignment version")
    return r.partitions()


def encode_assignment(parts: Mapping[str, frozenset[int]], version: int) -> bytes:
    """An assignment in the member's subscription version (capped at what Kafka writes), without user data."""
    out = bytearray(_I16.pack(min(max(version, 0), MAX_ASSIGNMENT_VERSION)))
    topics = [(t, ps) for t, ps in sorted(parts.items()) if ps]
    out += _I32.pack(len(topics))
    for topic, ps in topics:
        raw = topic.encode()
        out += _I16.pack(len(raw)) + raw + _I32.pack(len(ps))
        for p in sorted(ps):
            out += _I32.pack(p)
    out += _I32.pack(-1)
    return bytes(out)
