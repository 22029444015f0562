"""The controller's RPCs that Kafka 4.x removed (so kio has no codecs for them), with odradek's own wire encoding.

Kafka's ZooKeeper-era controller talks to brokers with LeaderAndIsr (key 4), StopReplica (key 5) and UpdateMetadata
(key 6); brokers ask it to move their leaderships with ControlledShutdown (key 7). The dataclasses keep Kafka's
field names so a reader of Kafka's JSON schemas recognises every field; the encoding is ours, because no client
outside odradek speaks these APIs any more and a JSON body is easy to read in a packet capture.

Wire format (API version 0 for all four keys, the only version odradek speaks)::

    request  = int32 size | int16 api_key | int16 api_version | int32 correlation_id
               | int16 client_id length + UTF-8 client_id            (Kafka's request header v1)
               | int32 body length | UTF-8 JSON body
    response = int32 size | int32 correlation_id                      (Kafka's response header v0)
               | int32 body length | UTF-8 JSON body

``size`` counts the bytes after itself, as in every Kafka frame. The JSON bodies are objects whose keys are the
dataclass field names below. Decoders reject anything that is not such an object with :class:`RequestFormatError`,
so a broker can answer a malformed body with a closed connection rather than a crash.

Conventions the broker relies on:

* A broker answers ``STALE_CONTROLLER_EPOCH`` (11) to any request whose ``controller_epoch`` is older than the
  newest it has seen, and ``STALE_BROKER_EPOCH`` (77) to one whose ``broker_epoch`` is not its current
  registration's (the ``czxid`` of its ``/brokers/ids/{id}`` znode); ``-1`` means "not checked".
* In UpdateMetadata, ``leader == LEADER_DURING_DELETE`` (-2) marks a partition of a topic being deleted: the
  broker drops it from its metadata cache, as Kafka's does.
"""

from __future__ import annotations

import json
import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field
from typing import Any, TypeVar

__all__ = [
    "API_VERSION",
    "CONTROLLED_SHUTDOWN",
    "CONTROLLER_API_KEYS",
    "LEADER_AND_ISR",
    "LEADER_DURING_DELETE",
    "NO_LEADER",
    "STOP_REPLICA",
    "UPDATE_METADATA",
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
    "RequestHeader",
    "StopReplicaPartition",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "decode_request",
    "decode_response",
    "encode_body",
    "frame_request",
    "frame_response",
    "parse_request_frame",
    "parse_response_frame",
    "partition_errors",
]

LEADER_AND_ISR = 4
STOP_REPLICA = 5
UPDATE_METADATA = 6
CONTROLLED_SHUTDOWN = 7
CONTROLLER_API_KEYS = frozenset({LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN})
API_VERSION = 0

NO_LEADER = -1
LEADER_DURING_DELETE = -2
"""Kafka's ``LeaderAndIsr.LeaderDuringDelete``: in UpdateMetadata, the partition's topic is being deleted."""


class RequestFormatError(ValueError):
    """A frame or body that is not what :mod:`odradek.controller.requests` writes."""


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

_REQUESTS: Mapping[int, type[Any]] = {
    LEADER_AND_ISR: LeaderAndIsrRequest,
    STOP_REPLICA: StopReplicaRequest,
    UPDATE_METADATA: UpdateMetadataRequest,
    CONTROLLED_SHUTDOWN: ControlledShutdownRequest,
}
_RESPONSES: Mapping[int, type[Any]] = {
    LEADER_AND_ISR: LeaderAndIsrResponse,
    STOP_REPLICA: StopReplicaResponse,
    UPDATE_METADATA: UpdateMetadataResponse,
    CONTROLLED_SHUTDOWN: ControlledShutdownResponse,
}
_NESTED: Mapping[tuple[type[Any], str], type[Any]] = {
    (LeaderAndIsrRequest, "partition_states"): LeaderAndIsrPartitionState,
    (LeaderAndIsrRequest, "live_leaders"): LeaderAndIsrLiveLeader,
    (LeaderAndIsrResponse, "partition_errors"): PartitionError,
    (StopReplicaRequest, "partitions"): StopReplicaPartition,
    (StopReplicaResponse, "partition_errors"): PartitionError,
    (UpdateMetadataRequest, "partition_states"): UpdateMetadataPartitionState,
    (UpdateMetadataRequest, "live_brokers"): MetadataBroker,
    (MetadataBroker, "endpoints"): MetadataEndpoint,
    (ControlledShutdownResponse, "remaining_partitions"): StopReplicaPartition,
}

T = TypeVar("T")


_PLANS: dict[type[Any], tuple[tuple[str, ...], Any, tuple[str, ...]]] = {}


def _plan(cls: type[Any]) -> tuple[tuple[str, ...], Any, tuple[str, ...]]:
    names = tuple(cls.__dataclass_fields__)
    nested = tuple(n for n in names if (cls, n) in _NESTED)
    plan = (names, operator.attrgetter(*names), nested)
    _PLANS[cls] = plan
    return plan


def _plain(value: Any) -> dict[str, Any]:
    """A dataclass as a dict, fields fetched in one C call; ``dataclasses.asdict`` deep-copies every value and
    is 20 times slower on a 100,000-partition UpdateMetadata."""
    names, getter, nested = _PLANS.get(type(value)) or _plan(type(value))
    values = getter(value)
    out = dict(zip(names, values if len(names) > 1 else (values,), strict=True))
    for name in nested:
        out[name] = [_plain(v) for v in out[name]]
    return out


_SHARED_STATES: dict[int, tuple[list[UpdateMetadataPartitionState], str]] = {}
"""Encoded partition-state lists of recent UpdateMetadata requests, by list identity (the list is kept, so its id
cannot be reused while cached): a round sends the same states to every broker, only ``broker_epoch`` differs."""


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def encode_body(message: Any) -> bytes:
    """Any request or response dataclass of this module as its JSON body."""
    if isinstance(message, UpdateMetadataRequest) and len(message.partition_states) > 100:
        states = message.partition_states
        cached = _SHARED_STATES.get(id(states))
        if cached is None or cached[0] is not states:
            cached = (states, _dumps([_plain(s) for s in states]))
            _SHARED_STATES[id(states)] = cached
            for stale in list(_SHARED_STATES)[:-4]:  # channels may encode from worker threads
                _SHARED_STATES.pop(stale, None)
        return (
            f'{{"controller_id":{message.controller_id},"controller_epoch":{message.controller_epoch},'
            f'"broker_epoch":{message.broker_epoch},"partition_states":{cached[1]},'
            f'"live_brokers":{_dumps([_plain(b) for b in message.live_brokers])}}}'
        ).encode()
    return _dumps(_plain(message)).encode("utf-8")


def _is_int(value: Any) -> bool:
    return type(value) is int  # bool is not int here, as JSON's true is not a number


def _is_int_list(value: Any) -> bool:
    return type(value) is list and (not value or set(map(type, value)) == {int})


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": _is_int,
    "bool": lambda v: type(v) is bool,
    "str": lambda v: type(v) is str,
    "str | None": lambda v: v is None or type(v) is str,
    "list[int]": _is_int_list,
}
# Per dataclass, once: (field, required, nested class or None, check or None, annotation). Decoding a 100,000-partition
# LeaderAndIsr builds 500,000 objects, so the per-field work is kept to a dict lookup and one type test.
_Spec = list[tuple[str, bool, type[Any] | None, Callable[[Any], bool] | None, str]]
_SPECS: dict[type[Any], _Spec] = {}


def _spec(cls: type[Any]) -> _Spec:
    spec = _SPECS.get(cls)
    if spec is None:
        spec = []
        for f in cls.__dataclass_fields__.values():
            required = f.default is MISSING and f.default_factory is MISSING
            nested = _NESTED.get((cls, f.name))
            annotation = str(f.type)
            spec.append((f.name, required, nested, None if nested else _CHECKS.get(annotation), annotation))
        _SPECS[cls] = spec
    return spec


def _build(cls: type[T], raw: Any) -> T:
    if type(raw) is not dict:
        raise RequestFormatError(f"{cls.__name__} must be a JSON object, got {type(raw).__name__}")
    kwargs: dict[str, Any] = {}
    for name, required, nested, check, annotation in _spec(cls):
        if name not in raw:
            if not required:  # defaulted: may be omitted
                continue
            raise RequestFormatError(f"{cls.__name__} lacks {name!r}")
        value = raw[name]
        if nested is not None:
            if type(value) is not list:
                raise RequestFormatError(f"{cls.__name__}.{name} must be a list")
            kwargs[name] = [_build(nested, v) for v in value]
        else:
            if check is not None and not check(value):
                raise RequestFormatError(f"{cls.__name__}.{name} must be {annotation}, got {value!r}")
            kwargs[name] = value
    return cls(**kwargs)


def _parse_json(body: bytes) -> Any:
    try:
        return json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestFormatError(f"body is not UTF-8 JSON: {exc}") from None


def decode_request(api_key: int, body: bytes) -> Any:
    """The request dataclass for ``api_key`` from its JSON body."""
    cls = _REQUESTS.get(api_key)
    if cls is None:
        raise RequestFormatError(f"api key {api_key} is not a controller API")
    return _build(cls, _parse_json(body))


def decode_response(api_key: int, body: bytes) -> Any:
    """The response dataclass for ``api_key`` from its JSON body."""
    cls = _RESPONSES.get(api_key)
    if cls is None:
        raise RequestFormatError(f"api key {api_key} is not a controller API")
    return _build(cls, _parse_json(body))


# ------------------------------------------------------------------------------------------- framing

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
_I16 = struct.Struct(">h")


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def frame_request(api_key: int, correlation_id: int, client_id: str | None, body: bytes) -> bytes:
    """A whole request frame, size prefix included, ready for the socket."""
    cid = b"" if client_id is None else client_id.encode("utf-8")
    parts = [
        _HEADER.pack(api_key, API_VERSION, correlation_id),
        _I16.pack(-1 if client_id is None else len(cid)),
        cid,
        _SIZE.pack(len(body)),
        body,
    ]
    payload = b"".join(parts)
    return _SIZE.pack(len(payload)) + payload


def parse_request_frame(frame: bytes | memoryview) -> tuple[RequestHeader, bytes]:
    """Header and JSON body of a request frame *without* its size prefix (as a server reads it)."""
    view = memoryview(frame)
    if len(view) < _HEADER.size + _I16.size:
        raise RequestFormatError("request frame shorter than its header")
    api_key, api_version, correlation_id = _HEADER.unpack_from(view, 0)
    (cid_len,) = _I16.unpack_from(view, _HEADER.size)
    pos = _HEADER.size + _I16.size
    client_id: str | None = None
    if cid_len >= 0:
        client_id = bytes(view[pos : pos + cid_len]).decode("utf-8", "replace")
        pos += cid_len
    body = _length_prefixed(view, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id), body


def frame_response(correlation_id: int, body: bytes) -> bytes:
    """A whole response frame, size prefix included."""
    payload = _SIZE.pack(correlation_id) + _SIZE.pack(len(body)) + body
    return _SIZE.pack(len(payload)) + payload


def parse_response_frame(frame: bytes | memoryview) -> tuple[int, bytes]:
    """Correlation id and JSON body of a response frame *without* its size prefix."""
    view = memoryview(frame)
    if len(view) < 4:
        raise RequestFormatError("response frame shorter than its header")
    (correlation_id,) = _SIZE.unpack_from(view, 0)
    return correlation_id, _length_prefixed(view, 4)


def _length_prefixed(view: memoryview, pos: int) -> bytes:
    if len(view) < pos + 4:
        raise RequestFormatError("frame ends before its body length")
    (length,) = _SIZE.unpack_from(view, pos)
    if length < 0 or pos + 4 + length > len(view):
        raise RequestFormatError(f"body length {length} does not fit the frame")
    return bytes(view[pos + 4 : pos + 4 + length])


def partition_errors(errors: Sequence[PartitionError]) -> dict[tuple[str, int], int]:
    """Per-partition error codes of a LeaderAndIsr or StopReplica response, keyed by (topic, partition)."""
    return {(e.topic, e.partition): e.error_code for e in errors}
