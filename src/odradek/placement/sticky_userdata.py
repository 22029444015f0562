"""User data of Kafka's sticky assignors, byte-for-byte as Kafka's
``StickyAssignor``/``CooperativeStickyAssignor``.

Eager sticky members carry their previous assignment and generation in user data (version 1: an int32-counted
array of {int16-length UTF-8 topic, int32-counted int32 partitions}, then an int32 generation; version 0 lacks
the generation).  Cooperative members carry only an int32 generation, their partitions travelling as owned
partitions.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from .model import TopicPartition

__all__ = [
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "decode_sticky_user_data_groups",
    "decode_sticky_user_data_ids",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I32_PAIR = struct.Struct(">ii")


def encode_sticky_user_data(partitions: Sequence[TopicPartition], generation: int | None = None) -> bytes:
    """Encode a member's partitions (version 1 with a generation, version 0 without).

    Consecutive partitions of one topic share an entry; order is preserved, so decoding gives the same list.
    """
    groups: list[tuple[str, list[int]]] = []
    for tp in partitions:
        if groups and groups[-1][0] == tp.topic:
            groups[-1][1].append(tp.partition)
        else:
            groups.append((tp.topic, [tp.partition]))
    out = [_I32.pack(len(groups))]
    for topic, parts in groups:
        raw = topic.encode("utf-8")
        out.append(_I16.pack(len(raw)))
        out.append(raw)
        out.append(struct.pack(f">i{len(parts)}i", len(parts), *parts))
    if generation is not None:
        out.append(_I32.pack(generation))
    return b"".join(out)


class _Underflow(Exception):
    pass


def _read_groups(data: bytes) -> tuple[list[tuple[str, tuple[int, ...]]], int]:
    """Parse the topic array; returns the groups and the offset after it."""
    try:
        (count,) = _I32.unpack_from(data, 0)
        if count < 0:
            raise _Underflow
        offset = 4
        groups: list[tuple[str, tuple[int, ...]]] = []
        names: dict[bytes, str] = {}
        for _ in range(count):
            (length,) = _I16.unpack_from(data, offset)
            offset += 2
            if length < 0 or offset + length > len(data):
                raise _Underflow
            raw = data[offset : offset + length]
            offset += length
            topic = names.get(raw)
            if topic is None:
                topic = raw.decode("utf-8", "replace")  # Java's new String(bytes, UTF_8) replaces, never fails
                names[raw] = topic
            (n,) = _I32.unpack_from(data, offset)
            offset += 4
            if n < 0:
                raise _Underflow
            parts = struct.unpack_from(f">{n}i", data, offset)
            offset += 4 * n
            groups.append((topic, parts))
        return groups, offset
    except struct.error as exc:
        raise _Underflow from exc


def decode_sticky_user_data_ids(
    data: bytes | None, topics: Mapping[bytes, tuple[int, int]]
) -> tuple[list[int], int | None]:
    """Decode straight to partition ids, for assignors that number partitions ``base + p``.

    ``topics`` maps a topic's UTF-8 name to ``(base, partition count)``; partitions of other topics, or beyond the
    count, are skipped (Kafka drops the former too).  The same result conventions as
    :func:`decode_sticky_user_data`.  This is the hot path of a big eager rebalance (a million entries), hence a
    parser of its own that never builds a ``TopicPartition`` or even a topic string.
    """
    if not data:
        return [], None
    unpack_i16 = _I16.unpack_from
    unpack_i32 = _I32.unpack_from
    unpack_pair = _I32_PAIR.unpack_from
    out: list[int] = []
    append = out.append
    size = len(data)
    try:
        (count,) = unpack_i32(data, 0)
        if count < 0:
            return [], -1
        offset = 4
        for _ in range(count):
            (length,) = unpack_i16(data, offset)
            offset += 2
            if length < 0 or offset + length > size:
                return [], -1
            topic = topics.get(data[offset : offset + length])
            offset += length
            if offset + 8 <= size:  # the count and, usually, the only partition in one call
                n, p = unpack_pair(data, offset)
            else:
                (n,) = unpack_i32(data, offset)
                p = -1
            offset += 4
            if n == 1:
                if topic is not None and 0 <= p < topic[1]:
                    append(topic[0] + p)
            elif n < 0:
                return [], -1
            else:
                parts = struct.unpack_from(f">{n}i", data, offset)
                if topic is not None:
                    base, limit = topic
                    out.extend(base + p for p in parts if 0 <= p < limit)
            offset += 4 * n
        if offset > size:
            return [], -1
    except struct.error:
        return [], -1
    if offset + 4 <= size:
        return out, unpack_i32(data, offset)[0]
    return out, None


def decode_sticky_user_data_groups(
    data: bytes | None,
) -> tuple[list[tuple[str, tuple[int, ...]]], int | None]:
    """Like :func:`decode_sticky_user_data` but keeps ``(topic, partitions)`` groups (cheaper)."""
    if not data:
        return [], None
    try:
        groups, offset = _read_groups(data)
    except _Underflow:
        return [], -1
    if offset + 4 <= len(data):
        return groups, _I32.unpack_from(data, offset)[0]
    return groups, None


def decode_sticky_user_data(data: bytes | None) -> tuple[list[TopicPartition], int | None]:
    """Kafka's ``StickyAssignor.memberData``: ``(partitions, generation)``.

    Empty or missing data gives ``([], None)``; version 0 gives no generation; undecodable data gives ``([],
    -1)``.
    """
    groups, generation = decode_sticky_user_data_groups(data)
    return [TopicPartition(t, p) for t, parts in groups for p in parts], generation


def encode_cooperative_user_data(generation: int) -> bytes:
    """The cooperative-sticky user data: one int32 generation."""
    return _I32.pack(generation)


def decode_cooperative_user_data(data: bytes | None) -> int | None:
    """The generation in cooperative-sticky user data: None without data, -1 when undecodable."""
    if data is None:
        return None
    if len(data) < 4:
        return -1
    return _I32.unpack_from(data, 0)[0]
