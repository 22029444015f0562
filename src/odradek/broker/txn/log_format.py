"""The records of ``__transaction_state``, byte for byte Kafka's TransactionLogKey and TransactionLogValue.

A Kafka broker (or ``kafka-dump-log --transaction-log-decoder``) reading our data directory must understand it, so
the formats are Kafka's generated message schemas, version-prefixed as ``MessageUtil.toVersionPrefixedBytes`` does:

* key, version 0: ``{transactional_id: string}``
* value, version 0 (what Kafka 3.x writes before ``transaction.version`` 1, and what we write):
  ``{producer_id: int64, producer_epoch: int16, timeout_ms: int32, status: int8,
  partitions: nullable [{topic: string, partition_ids: [int32]}], last_update_ms: int64, start_ms: int64}``;
  the partitions are null in state Empty.
* value, version 1 (flexible, read back): the same fields in compact encodings plus tagged fields 0
  PreviousProducerId, 1 NextProducerId and 2 ClientTransactionVersion.

A null value is a tombstone: the id expired.
"""

from __future__ import annotations

import struct
from collections import defaultdict

from odradek.broker.txn.state import NO_PRODUCER_ID, TxnState, TxnTransit
from odradek.placement.model import TopicPartition
from odradek.protocol.wire import WireFormatError, read_uvarint

KEY_VERSION = 0
VALUE_VERSION = 0

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TxnLogError(ValueError):
    """A record of ``__transaction_state`` that is not one of the versions above."""


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def decode_key(data: bytes) -> str:
    """The transactional id of a key; TxnLogError for an unknown key version (Kafka skips those with a warning)."""
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version != KEY_VERSION:
            raise TxnLogError(f"unknown transaction log key version {version}")
        (length,) = _I16.unpack_from(data, 2)
        if length < 0 or 4 + length > len(data):
            raise TxnLogError("bad transactional id length in a transaction log key")
        return bytes(data[4:4 + length]).decode()
    except (struct.error, UnicodeDecodeError) as exc:
        raise TxnLogError(f"unreadable transaction log key: {exc}") from None


def encode_value(transit: TxnTransit) -> bytes:
    """Value version 0 of ``transit``; Kafka refuses to write an Empty state with partitions, so do we."""
    if transit.state is TxnState.EMPTY and transit.partitions:
        raise ValueError(f"an Empty transaction has no partitions: {transit}")
    out = bytearray(_I16.pack(VALUE_VERSION))
    out += _I64.pack(transit.producer_id)
    out += _I16.pack(transit.producer_epoch)
    out += _I32.pack(transit.txn_timeout_ms)
    out += _I8.pack(int(transit.state))
    if transit.state is TxnState.EMPTY:
        out += _I32.pack(-1)
    else:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for tp in sorted(transit.partitions):
            by_topic[tp.topic].append(tp.partition)
        out += _I32.pack(len(by_topic))
        for topic, ids in by_topic.items():
            raw = topic.encode()
            out += _I16.pack(len(raw)) + raw
            out += _I32.pack(len(ids))
            for p in ids:
                out += _I32.pack(p)
    out += _I64.pack(transit.txn_last_update_timestamp)
    out += _I64.pack(transit.txn_start_timestamp)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def uvarint(self) -> int:
        value, self.pos = read_uvarint(self.data, self.pos)
        return value

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TxnLogError("length beyond the end of a transaction log value")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def string(self, compact: bool) -> str:
        n = self.uvarint() - 1 if compact else self.unpack(_I16)
        return self.take(n).decode()

    def array_length(self, compact: bool) -> int:
        return self.uvarint() - 1 if compact else self.unpack(_I32)

    def tagged(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields


def decode_value(data: bytes) -> TxnTransit:
    """A value of version 0 or 1 as the transition it records."""
    r = _Reader(bytes(data))
    try:
        version = r.unpack(_I16)
        if version not in (0, 1):
            raise TxnLogError(f"unknown transaction log value version {version}")
        flexible = version >= 1
        producer_id = r.unpack(_I64)
        epoch = r.unpack(_I16)
        timeout_ms = r.unpack(_I32)
        status = r.unpack(_I8)
        partitions: set[TopicPartition] = set()
        count = r.array_length(flexible)
        for _ in range(max(count, 0)):
            topic = r.string(flexible)
            for _ in range(r.array_length(flexible)):
                partitions.add(TopicPartition(topic, r.unpack(_I32)))
            if flexible:
                r.tagged()
        last_update = r.unpack(_I64)
        start = r.unpack(_I64)
        prev_producer_id = NO_PRODUCER_ID
        if flexible:
            tags = r.tagged()
            if 0 in tags and len(tags[0]) == 8:
                (prev_producer_id,) = _I64.unpack(tags[0])
        state = TxnState(status)
    except (struct.error, UnicodeDecodeError, WireFormatError, ValueError) as exc:
        if isinstance(exc, TxnLogError):
            raise
        raise TxnLogError(f"unreadable transaction log value: {exc}") from None
    return TxnTransit(producer_id, prev_producer_id, epoch, -1, timeout_ms, state, frozenset(partitions), start,
                      last_update)

