"""KIP-848 consumer groups' records in ``__consumer_offsets``, byte-for-byte Kafka's (key versions 3-8).

Kafka's new coordinator keeps a consumer group as a set of keyed records, each replaced by a newer one and removed
by a tombstone, so a coordinator that loads the partition rebuilds the group exactly:

* 3 ConsumerGroupMetadata ``{group}`` → ``{epoch}``
* 4 ConsumerGroupPartitionMetadata ``{group}`` → the subscribed topics' ids, names and partition counts
* 5 ConsumerGroupMemberMetadata ``{group, member}`` → the member's subscription, client and timeouts
* 6 ConsumerGroupTargetAssignmentMetadata ``{group}`` → ``{assignment epoch}``
* 7 ConsumerGroupTargetAssignmentMember ``{group, member}`` → the member's target partitions
* 8 ConsumerGroupCurrentMemberAssignment ``{group, member}`` → member epoch, previous epoch, state, assigned and
  pending-revocation partitions

Keys are non-flexible (int16 version, int16-length strings); values are flexible version 0 (compact strings and
arrays, uuids, an empty tagged-field section).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.broker.group.consumer_group import ClassicMetadata, ConsumerGroupState, ConsumerMember, Partitions
from odradek.broker.group.schema import SchemaError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

METADATA, PARTITION_METADATA, MEMBER, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = range(3, 9)
KEY_VERSIONS = frozenset(range(3, 9))
_STATES = {"stable": 0, "unrevoked_partitions": 1, "unreleased_partitions": 2}
_STATE_NAMES = {v: k for k, v in _STATES.items()}


# --- encoding -----------------------------------------------------------------------------------------------


def _key(version: int, *parts: str) -> bytes:
    out = bytearray(_I16.pack(version))
    for p in parts:
        raw = p.encode()
        out += _I16.pack(len(raw)) + raw
    return bytes(out)


def _uvarint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _cstr(out: bytearray, s: str | None) -> None:
    if s is None:
        out.append(0)
        return
    raw = s.encode()
    _uvarint(out, len(raw) + 1)
    out += raw


def _clen(out: bytearray, n: int) -> None:
    _uvarint(out, n + 1)


def _topic_partitions(out: bytearray, parts: Partitions, ids: Mapping[str, uuid.UUID]) -> None:
    known = [(t, ps) for t, ps in sorted(parts.items()) if t in ids]
    _clen(out, len(known))
    for t, ps in known:
        out += ids[t].bytes
        _clen(out, len(ps))
        for p in sorted(ps):
            out += _I32.pack(p)
        out.append(0)


def _value(body: bytearray, tags: bytes = b"\x00") -> bytes:
    return bytes(_I16.pack(0) + body + tags)


def _classic_tags(classic: ClassicMetadata | None) -> bytes:
    """The member value's tagged section: tag 0 is ClassicMemberMetadata, present only for classic members."""
    if classic is None:
        return b"\x00"
    data = bytearray(_I32.pack(classic.session_timeout_ms))
    _clen(data, len(classic.protocols))
    for name, metadata in classic.protocols:
        _cstr(data, name)
        _uvarint(data, len(metadata) + 1)
        data += metadata
        data.append(0)
    data.append(0)
    out = bytearray()
    _uvarint(out, 1)
    _uvarint(out, 0)
    _uvarint(out, len(data))
    return bytes(out + data)


def group_records(group: ConsumerGroupState, ids: Mapping[str, uuid.UUID]) -> dict[bytes, bytes]:
    """Every record that describes ``group`` now, by raw key (the caller writes what changed)."""
    gid = group.group_id
    records: dict[bytes, bytes] = {}
    body = bytearray(_I32.pack(group.group_epoch))
    records[_key(METADATA, gid)] = _value(body)
    body = bytearray()
    topics = [(t, n) for t, n in sorted(group.subscribed_counts.items()) if t in ids]
    _clen(body, len(topics))
    for t, n in topics:
        body += ids[t].bytes
        _cstr(body, t)
        body += _I32.pack(n)
        _clen(body, 0)
        body.append(0)
    records[_key(PARTITION_METADATA, gid)] = _value(body)
    body = bytearray(_I32.pack(group.assignment_epoch))
    records[_key(TARGET_METADATA, gid)] = _value(body)
    for mid, m in group.members.items():
        body = bytearray()
        _cstr(body, m.instance_id)
        _cstr(body, m.rack_id)
        _cstr(body, m.client_id)
        _cstr(body, m.client_host)
        _clen(body, len(m.subscribed_names))
        for name in m.subscribed_names:
            _cstr(body, name)
        _cstr(body, m.subscribed_regex)
        body += _I32.pack(m.rebalance_timeout_ms)
        _cstr(body, m.server_assignor)
        records[_key(MEMBER, gid, mid)] = _value(body, _classic_tags(m.classic))
        body = bytearray()
        _topic_partitions(body, group.target.get(mid, {}), ids)
        records[_key(TARGET_MEMBER, gid, mid)] = _value(body)
        body = bytearray(_I32.pack(m.member_epoch) + _I32.pack(m.previous_member_epoch))
        body.append(_STATES[m.state])
        _topic_partitions(body, m.assigned, ids)
        _topic_partitions(body, m.revoking, ids)
        records[_key(CURRENT_ASSIGNMENT, gid, mid)] = _value(body)
    return records


# --- decoding -----------------------------------------------------------------------------------------------


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise SchemaError("record ends early")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return b

    def i8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def uvarint(self) -> int:
        n = shift = 0
        while True:
            b = self.take(1)[0]
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 35:
                raise SchemaError("varint too long")

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise SchemaError("null key string")
        return self.take(n).decode()

    def cstr(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def clen(self) -> int:
        n = self.uvarint()
        return max(n - 1, 0)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.take(16))

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def value_version(self) -> None:
        if self.i16() != 0:
            raise SchemaError("unsupported consumer group record value version")


def _read_topic_partitions(r: _Reader, names: Mapping[uuid.UUID, str]) -> Partitions:
    parts: Partitions = {}
    for _ in range(r.clen()):
        tid = r.uuid()
        ps = frozenset(r.i32() for _ in range(r.clen()))
        r.skip_tags()
        if tid in names:
            parts[names[tid]] = ps
    return parts


def _read_classic_tag(r: _Reader) -> ClassicMetadata | None:
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        data = r.take(size)
        if tag != 0:
            continue
        c = _Reader(data)
        timeout = c.i32()
        protocols = []
        for _ in range(c.clen()):
            name = c.cstr() or ""
            protocols.append((name, c.take(c.clen())))
            c.skip_tags()
        classic = ClassicMetadata(timeout, protocols)
    return classic


@dataclass(slots=True)
class _Partial:
    epoch: int = 0
    assignment_epoch: int = 0
    topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    members: dict[str, bytes] = field(default_factory=dict)
    targets: dict[str, bytes] = field(default_factory=dict)
    currents: dict[str, bytes] = field(default_factory=dict)
    seen: bool = False


def key_version(raw_key: bytes) -> int:
    return int(_I16.unpack_from(raw_key)[0]) if len(raw_key) >= 2 else -1


def group_id_of(raw_key: bytes) -> str:
    """The group id of a consumer group record's key (versions 3-8: int16 version, then the group id)."""
    r = _Reader(raw_key)
    r.i16()
    return r.string()


def load_groups(latest: Mapping[bytes, bytes | None]) -> dict[str, ConsumerGroupState]:
    """Rebuild consumer groups from the last value of each key-version 3-8 record (tombstones already dropped
    or given as None)."""
    partial: dict[str, _Partial] = {}
    for raw_key, raw_value in latest.items():
        if raw_value is None:
            continue
        r = _Reader(raw_key)
        version = r.i16()
        gid = r.string()
        g = partial.setdefault(gid, _Partial())
        v = _Reader(raw_value)
        v.value_version()
        if version == METADATA:
            g.epoch, g.seen = v.i32(), True
        elif version == TARGET_METADATA:
            g.assignment_epoch = v.i32()
        elif version == PARTITION_METADATA:
            for _ in range(v.clen()):
                tid = v.uuid()
                name = v.cstr() or ""
                count = v.i32()
                for _ in range(v.clen()):
                    v.i32()
                    for _ in range(v.clen()):
                        v.cstr()
                    v.skip_tags()
                v.skip_tags()
                g.topics[name] = (tid, count)
        elif version in (MEMBER, TARGET_MEMBER, CURRENT_ASSIGNMENT):
            mid = r.string()
            {MEMBER: g.members, TARGET_MEMBER: g.targets, CURRENT_ASSIGNMENT: g.currents}[version][mid] = raw_value
    groups: dict[str, ConsumerGroupState] = {}
    for gid, g in partial.items():
        if not g.seen:
            continue
        names = {tid: name for name, (tid, _) in g.topics.items()}
        group = ConsumerGroupState(gid, group_epoch=g.epoch, assignment_epoch=g.assignment_epoch)
        group.subscribed_counts = {name: count for name, (_, count) in g.topics.items()}
        for mid, raw in g.members.items():
            v = _Reader(raw)
            v.value_version()
            m = ConsumerMember(mid)
            m.instance_id, m.rack_id = v.cstr(), v.cstr()
            m.client_id, m.client_host = v.cstr() or "", v.cstr() or ""
            m.subscribed_names = tuple(v.cstr() or "" for _ in range(v.clen()))
            m.subscribed_regex = v.cstr()
            m.rebalance_timeout_ms = v.i32()
            m.server_assignor = v.cstr()
            m.classic = _read_classic_tag(v)
            if mid in g.currents:
                c = _Reader(g.currents[mid])
                c.value_version()
                m.member_epoch, m.previous_member_epoch = c.i32(), c.i32()
                m.state = _STATE_NAMES.get(c.i8(), "stable")
                m.assigned = _read_topic_partitions(c, names)
                m.revoking = _read_topic_partitions(c, names)
                m.last_sent = dict(m.assigned)
            group.members[mid] = m
            if mid in g.targets:
                t = _Reader(g.targets[mid])
                t.value_version()
                group.target[mid] = _read_topic_partitions(t, names)
        groups[gid] = group
    return groups
