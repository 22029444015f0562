"""The few Java semantics Kafka's answers depend on: String order, String/TopicPartition hash codes, HashMap
order.

Kafka sorts member ids with ``String.compareTo`` (UTF-16 code units) and iterates some ``HashMap``s whose
order leaks into results.  Python compares code points, which agrees with UTF-16 order unless a string holds a
character outside the Basic Multilingual Plane; :func:`java_key` bridges that case so sorts agree with Java
for every string.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "hashmap_order",
    "java_key",
    "java_sorted",
    "string_hash",
    "to_int32",
    "topic_partition_hash",
]


def java_key(s: str) -> str:
    """A string whose Python order equals Java's ``String.compareTo`` order of ``s``.

    Characters beyond U+FFFF become their two UTF-16 surrogates (lone surrogates compare as code units).
    """
    if s.isascii() or max(s) <= "\uffff":
        return s
    units = s.encode("utf-16-be", "surrogatepass")
    return "".join(chr((units[i] << 8) | units[i + 1]) for i in range(0, len(units), 2))


def java_sorted(strings: Iterable[str]) -> list[str]:
    """Sort strings as ``Collections.sort`` on Java Strings would."""
    return sorted(strings, key=java_key)


def to_int32(h: int) -> int:
    """Reinterpret the low 32 bits as a signed Java int."""
    h &= 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def string_hash(s: str) -> int:
    """``java.lang.String.hashCode`` as an unsigned 32-bit value."""
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h


def coordinator_partition(key: str, partitions: int) -> int:
    """The partition of an internal topic that holds ``key`` (a group or transactional id): Kafka's
    ``Utils.abs(key.hashCode) % partitions``, where ``Utils.abs`` is ``Math.abs`` with ``Integer.MIN_VALUE`` mapped to
    0. Not ``hashCode & 0x7fffffff``, the partitioners' ``toPositive``: the two differ for every negative hash."""
    h = to_int32(string_hash(key))
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def topic_partition_hash(topic: str, partition: int) -> int:
    """``TopicPartition.hashCode`` as an unsigned 32-bit value."""
    return (31 * (31 + partition) + string_hash(topic)) & 0xFFFFFFFF


def _spread(h: int) -> int:
    return (h ^ (h >> 16)) & 0xFFFFFFFF


def hashmap_order(hashes_in_insertion_order: list[int], initial_capacity: int = 16) -> list[int]:
    """Indices of keys in the order a ``java.util.HashMap`` iterates them (no removals, no treeified bins).

    ``hashes_in_insertion_order`` are the keys' ``hashCode()`` values (unsigned 32-bit) in insertion order.
    """
    cap = 1
    while cap < initial_capacity:
        cap <<= 1
    for n in range(1, len(hashes_in_insertion_order) + 1):
        if n > 0.75 * cap:
            cap <<= 1
    mask = cap - 1
    return sorted(
        range(len(hashes_in_insertion_order)), key=lambda i: (_spread(hashes_in_insertion_order[i]) & mask, i)
    )
