"""The controller's RPCs in Kafka's own binary format, at the versions odradek serves.

Kafka's ZooKeeper-era controller talks to brokers with LeaderAndIsr (key 4), StopReplica (key 5) and UpdateMetadata
(key 6); brokers ask it to move their leaderships with ControlledShutdown (key 7). Kafka 4 removed them, so kio has
no codecs; the encoders and decoders here are written from Kafka 3.x's message schemas
(``clients/src/main/resources/common/message/*.json``). The dataclasses keep odradek's own shape (the controller's
batch builder and the broker build and read them); only the bytes are Kafka's.

Versions served (:data:`VERSIONS`), one per key, each the first flexible one that carries what odradek sends and
nothing it would have to invent:

* LeaderAndIsr **v4**: first flexible version, with AddingReplicas/RemovingReplicas and IsNew; v5 adds topic ids
  and a request type, which odradek's requests do not carry.
* UpdateMetadata **v6**: first flexible version, with listeners, racks and offline replicas; v7 adds topic ids.
* StopReplica **v3**: flexible, grouped by topic, with a delete flag and leader epoch per partition. odradek's
  request has one delete flag, written into every partition; the leader epoch is written as -1 (Kafka's
  ``NoEpoch``: not fenced) and ignored when read. A request whose partitions disagree on the flag is refused, and
  an empty one reads back with ``delete_partitions=False`` (there is nowhere to carry the flag). v2's single
  request-wide flag would map one to one, but v3 is what Kafka's controllers send from 2.6 on (KIP-570), and its
  leader epochs leave room for fencing StopReplica later.
* ControlledShutdown **v3**: first flexible version, with the broker epoch.

All four are flexible, so requests carry Kafka's request header v2 and responses its response header v1
(:mod:`odradek.protocol.wire`). Partitions are grouped by topic on the wire, in the order each topic first appears;
a request whose list interleaves topics reads back grouped. Security protocols travel as Kafka's ids
(:data:`SECURITY_PROTOCOLS`). Decoders refuse anything that is not exactly one such body (truncation, lengths past
the end, null arrays, bad UTF-8, trailing bytes) with :class:`RequestFormatError`, so a broker answers a malformed
request with a closed connection rather than a crash.

Speed matters at failover, when LeaderAndIsr and UpdateMetadata carry 100,000 partitions: each partition entry is
packed, and read back, by one struct compiled for its shape (the lengths of its replica lists), with no per-field
Python in between; 2-5 times faster than the JSON codec this replaced (bench/controller_codec.py, RESULTS.md).

Conventions the broker relies on:

* A broker answers ``STALE_CONTROLLER_EPOCH`` (11) to any request whose ``controller_epoch`` is older than the
  newest it has seen, and ``STALE_BROKER_EPOCH`` (77) to one whose ``broker_epoch`` is not its current
  registration's (the ``czxid`` of its ``/brokers/ids/{id}`` znode); ``-1`` means "not checked".
* In UpdateMetadata, ``leader == LEADER_DURING_DELETE`` (-2) marks a partition of a topic being deleted: the
  broker drops it from its metadata cache, as Kafka's does.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.protocol.wire import (
    SIZE,
    RequestHeader,
    WireFormatError,
    compact_string,
    nullable_compact_string,
    read_compact_string,
    read_nullable_compact_string,
    read_request_header,
    read_uvarint,
    response_header,
    skip_tagged_fields,
    uvarint,
)

__all__ = [
    "CONTROLLED_SHUTDOWN",
    "CONTROLLER_API_KEYS",
    "LEADER_AND_ISR",
    "LEADER_DURING_DELETE",
    "NO_LEADER",
    "SECURITY_PROTOCOLS",
    "STOP_REPLICA",
    "UPDATE_METADATA",
    "VERSIONS",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "LeaderAndIsrLiveLeader",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "MetadataBroker",
    "MetadataEndpoint",
    "PartitionError",
    "RequestFormatError",
    "StopReplicaPartition",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "decode_request",
    "decode_response",
    "encode_body",
    "frame_response",
    "parse_request_frame",
    "partition_errors",
]

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7
CONTROLLER_API_KEYS = frozenset({LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN})
VERSIONS: Mapping[int, int] = {LEADER_AND_ISR: 4, STOP_REPLICA: 3, UPDATE_METADATA: 6, CONTROLLED_SHUTDOWN: 3}
"""The one version of each key that is encoded, decoded and advertised; all are flexible."""

NO_LEADER = -1
LEADER_DURING_DELETE = -2
"""Kafka's ``LeaderAndIsr.LeaderDuringDelete``: in UpdateMetadata, the partition's topic is being deleted."""

_KEY_VERSION = struct.Struct(">hh")


class RequestFormatError(ValueError):
    """A frame or body that is not the Kafka encoding of a served version, or a message that cannot be encoded."""


# ---------------------------------------------------------------------------------------------- bodies


@dataclass(slots=True)
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    is_new: bool = False


@dataclass(slots=True)
class LeaderAndIsrLiveLeader:
    broker_id: int
    host_name: str
    port: int


@dataclass(slots=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[LeaderAndIsrPartitionState]
    live_leaders: list[LeaderAndIsrLiveLeader]


@dataclass(slots=True)
class PartitionError:
    topic: str
    partition: int
    error_code: int = 0


@dataclass(slots=True)
class LeaderAndIsrResponse:
    error_code: int
    partition_errors: list[PartitionError] = field(default_factory=list)


@dataclass(slots=True)
class StopReplicaPartition:
    topic: str
    partition: int


@dataclass(slots=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    delete_partitions: bool
    partitions: list[StopReplicaPartition]


@dataclass(slots=True)
class StopReplicaResponse:
    error_code: int
    partition_errors: list[PartitionError] = field(default_factory=list)


@dataclass(slots=True)
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: list[int]
    zk_version: int
    replicas: list[int]
    offline_replicas: list[int] = field(default_factory=list)


@dataclass(slots=True)
class MetadataEndpoint:
    port: int
    host: str
    listener: str
    security_protocol: str = "PLAINTEXT"


@dataclass(slots=True)
class MetadataBroker:
    id: int
    endpoints: list[MetadataEndpoint]
    rack: str | None = None


@dataclass(slots=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: list[UpdateMetadataPartitionState]
    live_brokers: list[MetadataBroker]


@dataclass(slots=True)
class UpdateMetadataResponse:
    error_code: int


@dataclass(slots=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int


@dataclass(slots=True)
class ControlledShutdownResponse:
    error_code: int
    remaining_partitions: list[StopReplicaPartition] = field(default_factory=list)


# ------------------------------------------------------------------------------------------- codecs

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_EPOCHS = struct.Struct(">iiq")  # controller id, controller epoch, broker epoch: every request's start
_PARTITION_HEAD = struct.Struct(">iiii")  # partition, controller epoch, leader, leader epoch
_INDEX_EPOCH = struct.Struct(">ii")
_PARTITION_ERROR = struct.Struct(">ihB")  # partition, error code, empty tagged fields
_SHUTDOWN = struct.Struct(">iqB")
_ERROR_CODE = struct.Struct(">hB")
_ENDPOINT_TAIL = struct.Struct(">hB")

_SMALL = 0x7F
"""Arrays shorter than this have a one-byte compact length, so a partition's whole entry is one precompiled struct."""
_INT32S = [struct.Struct(f">{n}i") for n in range(_SMALL + 1)]

_EMPTY_TAGS = b"\x00"
_NO_EPOCH = -1
"""StopReplica v3's per-partition leader epoch when the controller does not fence by it (Kafka's ``NoEpoch``)."""

SECURITY_PROTOCOLS: Mapping[str, int] = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
"""Kafka's ``SecurityProtocol`` ids, which UpdateMetadata carries instead of names."""
_SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOLS.items()}


def _int32_array(values: Sequence[int]) -> bytes:
    n = len(values)
    return uvarint(n + 1) + (_INT32S[n] if n <= _SMALL else struct.Struct(f">{n}i")).pack(*values)


def _shape_struct(formats: str, shape: tuple[int, ...]) -> struct.Struct:
    """``formats`` has one ``{}`` per int32 array: each becomes a one-byte length and that many int32s."""
    return struct.Struct(">" + formats.format(*(f"B{n}i" for n in shape)))


def _group(chunks_by_topic: dict[str, list[bytes]]) -> list[bytes]:
    """Kafka's ``[]TopicState``: the topic name, its partitions' entries, empty tagged fields."""
    parts = [uvarint(len(chunks_by_topic) + 1)]
    for topic, chunks in chunks_by_topic.items():
        parts.append(compact_string(topic))
        parts.append(uvarint(len(chunks) + 1))
        parts.extend(chunks)
        parts.append(_EMPTY_TAGS)
    return parts


_LAIR_FORMAT = "iiii{}i{}{}{}?B"  # head, isr, zk version, replicas, adding, removing, is_new, tags
_LAIR_PACKERS: dict[tuple[int, int, int, int], Callable[..., bytes]] = {}
_LAIR_FIELDS = operator.attrgetter(
    "topic", "partition", "controller_epoch", "leader", "leader_epoch", "isr", "zk_version", "replicas",
    "adding_replicas", "removing_replicas", "is_new",
)


def _lair_partition_slow(s: LeaderAndIsrPartitionState) -> bytes:
    """A partition whose shape has no packer yet (compiled and kept), or has an array too long for one."""
    shape = (len(s.isr), len(s.replicas), len(s.adding_replicas), len(s.removing_replicas))
    if max(shape) < _SMALL:
        packer = _LAIR_PACKERS[shape] = _shape_struct(_LAIR_FORMAT, shape).pack
        return packer(
            s.partition, s.controller_epoch, s.leader, s.leader_epoch, shape[0] + 1, *s.isr, s.zk_version,
            shape[1] + 1, *s.replicas, shape[2] + 1, *s.adding_replicas, shape[3] + 1, *s.removing_replicas,
            s.is_new, 0,
        )
    return b"".join((
        _PARTITION_HEAD.pack(s.partition, s.controller_epoch, s.leader, s.leader_epoch), _int32_array(s.isr),
        _I32.pack(s.zk_version), _int32_array(s.replicas), _int32_array(s.adding_replicas),
        _int32_array(s.removing_replicas), b"\x01" if s.is_new else b"\x00", _EMPTY_TAGS,
    ))


def _encode_leader_and_isr(r: LeaderAndIsrRequest) -> bytes:
    """Version 4: ControllerId, ControllerEpoch, BrokerEpoch, TopicStates, LiveLeaders."""
    by_topic: dict[str, list[bytes]] = {}
    packers = _LAIR_PACKERS
    for s in r.partition_states:
        topic, partition, cepoch, leader, lepoch, isr, zk, replicas, adding, removing, is_new = _LAIR_FIELDS(s)
        shape = (len(isr), len(replicas), len(adding), len(removing))
        packer = packers.get(shape)
        if packer is None:
            chunk = _lair_partition_slow(s)
        else:
            chunk = packer(partition, cepoch, leader, lepoch, shape[0] + 1, *isr, zk, shape[1] + 1, *replicas,
                           shape[2] + 1, *adding, shape[3] + 1, *removing, is_new, 0)
        group = by_topic.get(topic)
        if group is None:
            by_topic[topic] = [chunk]
        else:
            group.append(chunk)
    parts = [_EPOCHS.pack(r.controller_id, r.controller_epoch, r.broker_epoch), *_group(by_topic)]
    parts.append(uvarint(len(r.live_leaders) + 1))
    for leader in r.live_leaders:
        parts.append(_I32.pack(leader.broker_id) + compact_string(leader.host_name) + _I32.pack(leader.port)
                     + _EMPTY_TAGS)
    parts.append(_EMPTY_TAGS)
    return b"".join(parts)


_UM_FORMAT = "iiii{}i{}{}B"  # head, isr, zk version, replicas, offline replicas, tags
_UM_PACKERS: dict[tuple[int, int, int], Callable[..., bytes]] = {}
_UM_FIELDS = operator.attrgetter(
    "topic", "partition", "controller_epoch", "leader", "leader_epoch", "isr", "zk_version", "replicas",
    "offline_replicas",
)


def _um_partition_slow(s: UpdateMetadataPartitionState) -> bytes:
    shape = (len(s.isr), len(s.replicas), len(s.offline_replicas))
    if max(shape) < _SMALL:
        packer = _UM_PACKERS[shape] = _shape_struct(_UM_FORMAT, shape).pack
        return packer(s.partition, s.controller_epoch, s.leader, s.leader_epoch, shape[0] + 1, *s.isr,
                      s.zk_version, shape[1] + 1, *s.replicas, shape[2] + 1, *s.offline_replicas, 0)
    return b"".join((
        _PARTITION_HEAD.pack(s.partition, s.controller_epoch, s.leader, s.leader_epoch), _int32_array(s.isr),
        _I32.pack(s.zk_version), _int32_array(s.replicas), _int32_array(s.offline_replicas), _EMPTY_TAGS,
    ))


def _um_topic_states(states: list[UpdateMetadataPartitionState]) -> bytes:
    by_topic: dict[str, list[bytes]] = {}
    packers = _UM_PACKERS
    for s in states:
        topic, partition, cepoch, leader, lepoch, isr, zk, replicas, offline = _UM_FIELDS(s)
        shape = (len(isr), len(replicas), len(offline))
        packer = packers.get(shape)
        if packer is None:
            chunk = _um_partition_slow(s)
        else:
            chunk = packer(partition, cepoch, leader, lepoch, shape[0] + 1, *isr, zk, shape[1] + 1, *replicas,
                           shape[2] + 1, *offline, 0)
        group = by_topic.get(topic)
        if group is None:
            by_topic[topic] = [chunk]
        else:
            group.append(chunk)
    return b"".join(_group(by_topic))


_SHARED_STATES: dict[int, tuple[list[UpdateMetadataPartitionState], bytes]] = {}
"""Encoded TopicStates of recent large UpdateMetadata requests, by list identity (the list is kept, so its id
cannot be reused while cached): a round sends the same states to every broker, only ``broker_epoch`` differs."""
_SHARED_MIN_PARTITIONS = 100


def _security_protocol(name: str) -> int:
    code = SECURITY_PROTOCOLS.get(name)
    if code is None:
        raise RequestFormatError(f"security protocol {name!r} has no Kafka id")
    return code


def _encode_update_metadata(r: UpdateMetadataRequest) -> bytes:
    """Version 6: ControllerId, ControllerEpoch, BrokerEpoch, TopicStates, LiveBrokers."""
    states = r.partition_states
    if len(states) > _SHARED_MIN_PARTITIONS:
        cached = _SHARED_STATES.get(id(states))
        if cached is None or cached[0] is not states:
            cached = (states, _um_topic_states(states))
            _SHARED_STATES[id(states)] = cached
            for stale in list(_SHARED_STATES)[:-4]:  # channels may encode from worker threads
                _SHARED_STATES.pop(stale, None)
        topic_states = cached[1]
    else:
        topic_states = _um_topic_states(states)
    parts = [_EPOCHS.pack(r.controller_id, r.controller_epoch, r.broker_epoch), topic_states,
             uvarint(len(r.live_brokers) + 1)]
    for broker in r.live_brokers:
        parts.append(_I32.pack(broker.id))
        parts.append(uvarint(len(broker.endpoints) + 1))
        for e in broker.endpoints:
            parts.append(_I32.pack(e.port) + compact_string(e.host) + compact_string(e.listener)
                         + _ENDPOINT_TAIL.pack(_security_protocol(e.security_protocol), 0))
        parts.append(nullable_compact_string(broker.rack) + _EMPTY_TAGS)
    parts.append(_EMPTY_TAGS)
    return b"".join(parts)


def _encode_stop_replica(r: StopReplicaRequest) -> bytes:
    """Version 3: one TopicState per topic; every partition carries the request's delete flag and no leader
    epoch, as the controller does not fence StopReplica by leader epoch."""
    tail = _I32.pack(_NO_EPOCH) + (b"\x01" if r.delete_partitions else b"\x00") + _EMPTY_TAGS
    by_topic: dict[str, list[bytes]] = {}
    for p in r.partitions:
        by_topic.setdefault(p.topic, []).append(_I32.pack(p.partition) + tail)
    return b"".join((_EPOCHS.pack(r.controller_id, r.controller_epoch, r.broker_epoch), *_group(by_topic),
                     _EMPTY_TAGS))


def _encode_controlled_shutdown(r: ControlledShutdownRequest) -> bytes:
    """Version 3: BrokerId, BrokerEpoch."""
    return _SHUTDOWN.pack(r.broker_id, r.broker_epoch, 0)


def _encode_partition_errors(error_code: int, errors: Sequence[PartitionError]) -> bytes:
    """LeaderAndIsr v4's and StopReplica v3's response: ErrorCode, then (TopicName, PartitionIndex, ErrorCode)."""
    parts = [_I16.pack(error_code), uvarint(len(errors) + 1)]
    for e in errors:
        parts.append(compact_string(e.topic) + _PARTITION_ERROR.pack(e.partition, e.error_code, 0))
    parts.append(_EMPTY_TAGS)
    return b"".join(parts)


def _encode_leader_and_isr_response(r: LeaderAndIsrResponse) -> bytes:
    return _encode_partition_errors(r.error_code, r.partition_errors)


def _encode_stop_replica_response(r: StopReplicaResponse) -> bytes:
    return _encode_partition_errors(r.error_code, r.partition_errors)


def _encode_update_metadata_response(r: UpdateMetadataResponse) -> bytes:
    return _ERROR_CODE.pack(r.error_code, 0)


def _encode_controlled_shutdown_response(r: ControlledShutdownResponse) -> bytes:
    parts = [_I16.pack(r.error_code), uvarint(len(r.remaining_partitions) + 1)]
    for p in r.remaining_partitions:
        parts.append(compact_string(p.topic) + _I32.pack(p.partition) + _EMPTY_TAGS)
    parts.append(_EMPTY_TAGS)
    return b"".join(parts)


_ENCODERS: Mapping[type[Any], Callable[[Any], bytes]] = {
    LeaderAndIsrRequest: _encode_leader_and_isr,
    UpdateMetadataRequest: _encode_update_metadata,
    StopReplicaRequest: _encode_stop_replica,
    ControlledShutdownRequest: _encode_controlled_shutdown,
    LeaderAndIsrResponse: _encode_leader_and_isr_response,
    StopReplicaResponse: _encode_stop_replica_response,
    UpdateMetadataResponse: _encode_update_metadata_response,
    ControlledShutdownResponse: _encode_controlled_shutdown_response,
}


def encode_body(message: Any) -> bytes:
    """Any request or response dataclass of this module as its body at the version in :data:`VERSIONS`."""
    encoder = _ENCODERS.get(type(message))
    if encoder is None:
        raise TypeError(f"{type(message).__name__} is not a controller request or response")
    try:
        return encoder(message)
    except struct.error as exc:  # a number out of its field's range
        raise RequestFormatError(f"{type(message).__name__} cannot be encoded: {exc}") from None


# ------------------------------------------------------------------------------------------ decoding
#
# Every reader takes the body as bytes and a position and returns the value and the next position. Truncation shows
# as struct.error or IndexError, bad lengths and text as WireFormatError; _decode turns all of them into
# RequestFormatError with the message's name.


def _count(buf: bytes, pos: int) -> tuple[int, int]:
    """A non-nullable compact array's element count; each element takes at least a byte, which bounds it."""
    n = buf[pos]
    if n & 0x80:
        n, pos = read_uvarint(buf, pos)
    else:
        pos += 1
    if n == 0:
        raise WireFormatError(f"null array at byte {pos - 1} where the schema allows none")
    if n - 1 > len(buf) - pos:
        raise WireFormatError(f"array of {n - 1} elements at byte {pos} cannot fit in {len(buf) - pos} bytes")
    return n - 1, pos


def _int32s(buf: bytes, pos: int) -> tuple[list[int], int]:
    n = buf[pos]
    if n & 0x80:
        n, pos = read_uvarint(buf, pos)
    else:
        pos += 1
    if n <= 1:
        if n == 0:
            raise WireFormatError(f"null int32 array at byte {pos - 1} where the schema allows none")
        return [], pos
    n -= 1
    end = pos + 4 * n
    if end > len(buf):
        raise WireFormatError(f"array of {n} int32s at byte {pos} runs past the end")
    return list((_INT32S[n] if n <= _SMALL else struct.Struct(f">{n}i")).unpack_from(buf, pos)), end


def _tags(buf: bytes, pos: int) -> int:
    return pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)


# Reading a partition entry: its array lengths are peeked (one byte each while under 127 elements) to find its shape,
# and a struct compiled for that shape, with pad bytes over the lengths, unpacks the whole entry in one call. The
# first entry of each shape, and any entry with long or null arrays or tagged fields, takes the checked path, which
# reads field by field and compiles the shape's struct for the entries after it.
_ShapeReader = tuple[Callable[[bytes, int], tuple[Any, ...]], int, int, int, int]
_LAIR_FORMAT_READ = "iiii{}i{}{}{}?"  # as _LAIR_FORMAT, without the tagged fields (checked to be empty first)
_UM_FORMAT_READ = "iiii{}i{}{}"
_LAIR_READERS: dict[tuple[int, ...], _ShapeReader] = {}
_UM_READERS: dict[tuple[int, ...], _ShapeReader] = {}
_MAX_SHAPES = 1024
"""Shapes compiled per message type at most: the readers face the network, and real requests have a handful."""


def _shape_reader(formats: str, counts: tuple[int, ...]) -> _ShapeReader:
    """``counts`` are the arrays' one-byte compact lengths; the offsets say where each array ends in the values."""
    unpack = struct.Struct(">" + formats.format(*(f"x{c - 1}i" for c in counts))).unpack_from
    n = [c - 1 for c in counts] + [0]
    a = 4 + n[0]
    b = a + 1 + n[1]
    return unpack, a, b, b + n[2], b + n[2] + n[3]


def _lair_partition_checked(buf: bytes, pos: int, topic: str) -> tuple[LeaderAndIsrPartitionState, int]:
    partition, cepoch, leader, lepoch = _PARTITION_HEAD.unpack_from(buf, pos)
    isr, pos = _int32s(buf, pos + 16)
    (zk_version,) = _I32.unpack_from(buf, pos)
    replicas, pos = _int32s(buf, pos + 4)
    adding, pos = _int32s(buf, pos)
    removing, pos = _int32s(buf, pos)
    is_new = buf[pos] != 0
    counts = (len(isr) + 1, len(replicas) + 1, len(adding) + 1, len(removing) + 1)
    if max(counts) <= _SMALL and len(_LAIR_READERS) < _MAX_SHAPES:
        _LAIR_READERS[counts] = _shape_reader(_LAIR_FORMAT_READ, counts)
    state = LeaderAndIsrPartitionState(topic, partition, cepoch, leader, lepoch, isr, zk_version, replicas, adding,
                                       removing, is_new)
    return state, skip_tagged_fields(buf, pos + 1)


def _decode_leader_and_isr(buf: bytes) -> tuple[LeaderAndIsrRequest, int]:
    controller_id, controller_epoch, broker_epoch = _EPOCHS.unpack_from(buf, 0)
    pos = _EPOCHS.size
    i32 = _I32.unpack_from
    readers = _LAIR_READERS
    state = LeaderAndIsrPartitionState
    states: list[LeaderAndIsrPartitionState] = []
    append = states.append
    topics, pos = _count(buf, pos)
    for _ in range(topics):
        topic, pos = read_compact_string(buf, pos)
        partitions, pos = _count(buf, pos)
        for _ in range(partitions):
            try:  # a multi-byte length may send the peeks past the end: that entry takes the checked path
                c1 = buf[pos + 16]
                at = pos + 17 + 4 * c1  # past the ISR and the zk version
                c2 = buf[at]
                at += 4 * c2 - 3
                c3 = buf[at]
                at += 4 * c3 - 3
                c4 = buf[at]
                at += 4 * c4 - 3  # at IsNew
                reader = readers.get((c1, c2, c3, c4)) if buf[at + 1] == 0 else None
            except IndexError:
                reader = None
            if reader is None:
                s, pos = _lair_partition_checked(buf, pos, topic)
                append(s)
                continue
            unpack, a, b, c, d = reader
            v = unpack(buf, pos)
            append(state(topic, v[0], v[1], v[2], v[3], list(v[4:a]), v[a], list(v[a + 1:b]), list(v[b:c]),
                         list(v[c:d]), v[d]))
            pos = at + 2
        pos = _tags(buf, pos)
    live_leaders = []
    count, pos = _count(buf, pos)
    for _ in range(count):
        (broker_id,) = i32(buf, pos)
        host, pos = read_compact_string(buf, pos + 4)
        (port,) = i32(buf, pos)
        pos = _tags(buf, pos + 4)
        live_leaders.append(LeaderAndIsrLiveLeader(broker_id, host, port))
    request = LeaderAndIsrRequest(controller_id, controller_epoch, broker_epoch, states, live_leaders)
    return request, _tags(buf, pos)


def _um_partition_checked(buf: bytes, pos: int, topic: str) -> tuple[UpdateMetadataPartitionState, int]:
    partition, cepoch, leader, lepoch = _PARTITION_HEAD.unpack_from(buf, pos)
    isr, pos = _int32s(buf, pos + 16)
    (zk_version,) = _I32.unpack_from(buf, pos)
    replicas, pos = _int32s(buf, pos + 4)
    offline, pos = _int32s(buf, pos)
    counts = (len(isr) + 1, len(replicas) + 1, len(offline) + 1)
    if max(counts) <= _SMALL and len(_UM_READERS) < _MAX_SHAPES:
        _UM_READERS[counts] = _shape_reader(_UM_FORMAT_READ, counts)
    state = UpdateMetadataPartitionState(topic, partition, cepoch, leader, lepoch, isr, zk_version, replicas, offline)
    return state, skip_tagged_fields(buf, pos)


def _decode_update_metadata(buf: bytes) -> tuple[UpdateMetadataRequest, int]:
    controller_id, controller_epoch, broker_epoch = _EPOCHS.unpack_from(buf, 0)
    pos = _EPOCHS.size
    i32 = _I32.unpack_from
    readers = _UM_READERS
    state = UpdateMetadataPartitionState
    states: list[UpdateMetadataPartitionState] = []
    append = states.append
    topics, pos = _count(buf, pos)
    for _ in range(topics):
        topic, pos = read_compact_string(buf, pos)
        partitions, pos = _count(buf, pos)
        for _ in range(partitions):
            try:  # as in _decode_leader_and_isr
                c1 = buf[pos + 16]
                at = pos + 17 + 4 * c1  # past the ISR and the zk version
                c2 = buf[at]
                at += 4 * c2 - 3
                c3 = buf[at]
                at += 4 * c3 - 3  # at the tagged fields
                reader = readers.get((c1, c2, c3)) if buf[at] == 0 else None
            except IndexError:
                reader = None
            if reader is None:
                s, pos = _um_partition_checked(buf, pos, topic)
                append(s)
                continue
            unpack, a, b, c, _ = reader
            v = unpack(buf, pos)
            append(state(topic, v[0], v[1], v[2], v[3], list(v[4:a]), v[a], list(v[a + 1:b]), list(v[b:c])))
            pos = at + 1
        pos = _tags(buf, pos)
    brokers = []
    count, pos = _count(buf, pos)
    for _ in range(count):
        (broker_id,) = i32(buf, pos)
        endpoints = []
        n, pos = _count(buf, pos + 4)
        for _ in range(n):
            (port,) = i32(buf, pos)
            host, pos = read_compact_string(buf, pos + 4)
            listener, pos = read_compact_string(buf, pos)
            (protocol,) = _I16.unpack_from(buf, pos)
            name = _SECURITY_PROTOCOL_NAMES.get(protocol)
            if name is None:
                raise WireFormatError(f"unknown security protocol id {protocol}")
            pos = _tags(buf, pos + 2)
            endpoints.append(MetadataEndpoint(port, host, listener, name))
        rack, pos = read_nullable_compact_string(buf, pos)
        pos = _tags(buf, pos)
        brokers.append(MetadataBroker(broker_id, endpoints, rack))
    request = UpdateMetadataRequest(controller_id, controller_epoch, broker_epoch, states, brokers)
    return request, _tags(buf, pos)


def _decode_stop_replica(buf: bytes) -> tuple[StopReplicaRequest, int]:
    """The per-partition leader epochs are read and dropped (odradek's brokers do not fence StopReplica by them);
    the per-partition delete flags must agree, as odradek's request carries one."""
    controller_id, controller_epoch, broker_epoch = _EPOCHS.unpack_from(buf, 0)
    pos = _EPOCHS.size
    partitions = []
    deletes = set()
    topics, pos = _count(buf, pos)
    for _ in range(topics):
        topic, pos = read_compact_string(buf, pos)
        n, pos = _count(buf, pos)
        for _ in range(n):
            partition, _leader_epoch = _INDEX_EPOCH.unpack_from(buf, pos)
            deletes.add(buf[pos + 8] != 0)
            pos = _tags(buf, pos + 9)
            partitions.append(StopReplicaPartition(topic, partition))
        pos = _tags(buf, pos)
    if len(deletes) > 1:
        raise WireFormatError("partitions disagree on DeletePartition; odradek's StopReplica has one flag")
    request = StopReplicaRequest(controller_id, controller_epoch, broker_epoch, deletes == {True}, partitions)
    return request, _tags(buf, pos)


def _decode_controlled_shutdown(buf: bytes) -> tuple[ControlledShutdownRequest, int]:
    broker_id, broker_epoch = struct.unpack_from(">iq", buf, 0)
    return ControlledShutdownRequest(broker_id, broker_epoch), _tags(buf, 12)


def _decode_partition_errors(buf: bytes) -> tuple[int, list[PartitionError], int]:
    (error_code,) = _I16.unpack_from(buf, 0)
    errors = []
    count, pos = _count(buf, 2)
    for _ in range(count):
        topic, pos = read_compact_string(buf, pos)
        partition, code = struct.unpack_from(">ih", buf, pos)
        pos = _tags(buf, pos + 6)
        errors.append(PartitionError(topic, partition, code))
    return error_code, errors, _tags(buf, pos)


def _decode_leader_and_isr_response(buf: bytes) -> tuple[LeaderAndIsrResponse, int]:
    error_code, errors, pos = _decode_partition_errors(buf)
    return LeaderAndIsrResponse(error_code, errors), pos


def _decode_stop_replica_response(buf: bytes) -> tuple[StopReplicaResponse, int]:
    error_code, errors, pos = _decode_partition_errors(buf)
    return StopReplicaResponse(error_code, errors), pos


def _decode_update_metadata_response(buf: bytes) -> tuple[UpdateMetadataResponse, int]:
    (error_code,) = _I16.unpack_from(buf, 0)
    return UpdateMetadataResponse(error_code), _tags(buf, 2)


def _decode_controlled_shutdown_response(buf: bytes) -> tuple[ControlledShutdownResponse, int]:
    (error_code,) = _I16.unpack_from(buf, 0)
    remaining = []
    count, pos = _count(buf, 2)
    for _ in range(count):
        topic, pos = read_compact_string(buf, pos)
        (partition,) = _I32.unpack_from(buf, pos)
        pos = _tags(buf, pos + 4)
        remaining.append(StopReplicaPartition(topic, partition))
    return ControlledShutdownResponse(error_code, remaining), _tags(buf, pos)


_Decoder = Callable[[bytes], tuple[Any, int]]
_REQUEST_DECODERS: Mapping[int, _Decoder] = {
    LEADER_AND_ISR: _decode_leader_and_isr,
    STOP_REPLICA: _decode_stop_replica,
    UPDATE_METADATA: _decode_update_metadata,
    CONTROLLED_SHUTDOWN: _decode_controlled_shutdown,
}
_RESPONSE_DECODERS: Mapping[int, _Decoder] = {
    LEADER_AND_ISR: _decode_leader_and_isr_response,
    STOP_REPLICA: _decode_stop_replica_response,
    UPDATE_METADATA: _decode_update_metadata_response,
    CONTROLLED_SHUTDOWN: _decode_controlled_shutdown_response,
}


def _decode(decoders: Mapping[int, _Decoder], kind: str, api_key: int, body: bytes | memoryview) -> Any:
    decoder = decoders.get(api_key)
    if decoder is None:
        raise RequestFormatError(f"api key {api_key} is not a controller API")
    buf = bytes(body)
    try:
        message, pos = decoder(buf)
    except (struct.error, IndexError, ValueError) as exc:  # ValueError covers WireFormatError
        raise RequestFormatError(f"malformed {kind} for API {api_key} v{VERSIONS[api_key]}: {exc}") from None
    if pos != len(buf):
        raise RequestFormatError(f"{len(buf) - pos} bytes after the {kind} body for API {api_key}")
    return message


def decode_request(api_key: int, body: bytes | memoryview) -> Any:
    """The request dataclass for ``api_key`` from its body at the version in :data:`VERSIONS`."""
    return _decode(_REQUEST_DECODERS, "request", api_key, body)


def decode_response(api_key: int, body: bytes | memoryview) -> Any:
    """The response dataclass for ``api_key`` from its body at the version in :data:`VERSIONS`."""
    return _decode(_RESPONSE_DECODERS, "response", api_key, body)


# ---------------------------------------------------------------------------- framing, the broker's side


def parse_request_frame(frame: bytes | memoryview) -> tuple[RequestHeader, bytes]:
    """Header and body of a request frame *without* its size prefix (as a server reads it). Only the served
    version of each key is parsed: its header version depends on it."""
    buf = bytes(frame)
    try:
        api_key, api_version = _KEY_VERSION.unpack_from(buf, 0)
        if VERSIONS.get(api_key) != api_version:
            raise WireFormatError(f"API {api_key} v{api_version} is not served (see VERSIONS)")
        header, pos = read_request_header(buf, flexible=True)
    except (struct.error, WireFormatError) as exc:
        raise RequestFormatError(f"malformed request header: {exc}") from None
    return header, buf[pos:]


def frame_response(correlation_id: int, body: bytes) -> bytes:
    """A whole response frame, size prefix and response header v1 included."""
    header = response_header(correlation_id, flexible=True)
    return SIZE.pack(len(header) + len(body)) + header + body


def partition_errors(errors: Sequence[PartitionError]) -> dict[tuple[str, int], int]:
    """Per-partition error codes of a LeaderAndIsr or StopReplica response, keyed by (topic, partition)."""
    return {(e.topic, e.partition): e.error_code for e in errors}
