"""Runs a scenario against one broker, or one broker of a cluster, with odradek's own wire layer, and turns the answer
into plain data.

Each scenario gets a fresh connection (a malformed request may close it), and one more per other broker or login it
sends to (:attr:`Call.to`); a cluster's :class:`Actor` stops and starts brokers for :class:`Act` steps. Bodies are
built into kio entities at the exact version named, sent through :class:`odradek.protocol.client.BlockingConnection`,
and the decoded response is turned into dicts, lists and scalars (record batches decoded into their records) for the
normaliser and comparison.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import time
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from differential_corpus import Act, Batch, Call, Closed, Derived, Ref, Scenario, Topic

from odradek.protocol.client import BlockingConnection
from odradek.protocol.controller_requests import VERSIONS as CONTROLLER_VERSIONS
from odradek.protocol.controller_requests import decode_response, encode_body
from odradek.protocol.entities import decode_entity, default_of, encode_entity, entity_schemas
from odradek.protocol.records import decode_batch, encode_batch, iter_batches

__all__ = ["Actor", "Target", "build", "plain", "resolve", "run_scenario", "settle"]

SETUP_DEADLINE_S = 60.0
REQUEST_TIMEOUT_S = 30.0


class Actor(Protocol):
    """What changes a cluster for :class:`Act` steps (stop or start one broker), and puts it back afterwards."""

    def act(self, act: Act) -> None: ...

    def restore(self) -> bool:
        """Every broker running again, as before the scenario; whether any had to be started."""


@dataclass(frozen=True)
class Target:
    """The broker requests go to; ``node_id`` is what it calls itself (``{broker}`` in bodies, a broker resource).
    On a cluster, ``peers`` names every broker's ``host:port`` by id and ``actor`` stops and starts them; on a secured
    one, ``logins`` holds the calls that log a connection in as each named user (``Call.to`` names one), and
    ``teardown`` what puts shared state back after each scenario (sent as the first login)."""

    name: str
    host: str
    port: int
    node_id: int = -1
    peers: Mapping[int, str] = field(default_factory=dict)
    actor: Actor | None = None
    logins: Mapping[str, tuple[Call, ...]] = field(default_factory=dict)
    teardown: tuple[Call, ...] = ()
    admin: str | None = None
    """The login scenario topics are created through (None: the unauthenticated connection)."""

    @classmethod
    def of(cls, name: str, bootstrap: str, **more: Any) -> Target:
        """The broker at ``bootstrap`` (the first, for a cluster), its node id asked with Metadata (until the broker
        knows itself: a fresh Kafka answers with no brokers until its controller's first UpdateMetadata)."""
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        session = _Session(cls(name, host, int(port), **more), Scenario("node-id", Call(3, 12)))
        try:
            response = session.step(Call(3, 12, {"topics": []}, until=lambda r: bool(r["brokers"]),
                                         to=more.get("admin")))
        finally:
            session.close()
        me = next((b["node_id"] for b in response["brokers"] if b["port"] == int(port)),
                  response["brokers"][0]["node_id"])
        return cls(name, host, int(port), int(me), **more)


# ---------------------------------------------------------------------------------------------- building bodies


def _is_union(hint: Any) -> bool:
    import types
    return isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union


def _convert(hint: Any, value: Any) -> Any:
    if _is_union(hint):
        if value is None:
            return None
        return _convert(next(a for a in typing.get_args(hint) if a is not type(None)), value)
    if typing.get_origin(hint) is tuple:
        (item, _ellipsis) = typing.get_args(hint)
        return tuple(_convert(item, v) for v in value)
    if dataclasses.is_dataclass(hint):
        return build(hint, value)  # type: ignore[arg-type]
    if isinstance(hint, type):
        if issubclass(hint, datetime.timedelta):
            return value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value)
        if issubclass(hint, bool):
            return bool(value)
        if issubclass(hint, uuid.UUID):
            return value if isinstance(value, uuid.UUID) else uuid.UUID(value)
        if issubclass(hint, (int, str, bytes, float)):
            return hint(value)
    return value


def build(cls: type[Any], data: Mapping[str, Any]) -> Any:
    """A kio entity of ``cls`` from ``data`` (already resolved); missing fields take kio's default or a neutral
    value, and fields this version lacks are left out, so one body serves every version of an API."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
        elif f.default is not dataclasses.MISSING:
            kwargs[f.name] = f.default
        else:
            kwargs[f.name] = default_of(hints[f.name])
    return cls(**kwargs)


def _names(scenario: Scenario, target: Target) -> dict[str, str]:
    slug = re.sub(r"[^a-zA-Z0-9.-]", "-", scenario.name)
    return {"topic": f"d.{slug}", "group": f"g.{slug}", "txn": f"t.{slug}", "broker": str(target.node_id)}


def _batch_bytes(batch: Batch, captured: Mapping[str, Any]) -> bytes:
    pid = captured[batch.producer_id.name] if isinstance(batch.producer_id, Ref) else batch.producer_id
    epoch = captured[batch.producer_epoch.name] if isinstance(batch.producer_epoch, Ref) else batch.producer_epoch
    keys = batch.keys or (None,) * len(batch.values)
    out = bytearray()
    for i in range(batch.repeat):
        seq = batch.base_sequence if batch.base_sequence < 0 else batch.base_sequence + i * len(batch.values)
        one = encode_batch([(k, v, []) for k, v in zip(keys, batch.values, strict=True)],
                           timestamp_ms=batch.timestamp_ms, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           compression=batch.compression, transactional=batch.transactional)
        if batch.corrupt_crc:
            one[17] ^= 0x01
        if batch.magic is not None:
            one[16] = batch.magic
        out += one
    return bytes(out[:len(out) - batch.truncate])


def resolve(value: Any, names: Mapping[str, str], captured: Mapping[str, Any]) -> Any:
    """Placeholders, :class:`Ref` s, :class:`Derived` values and :class:`Batch` es replaced by what they stand for on
    this broker."""
    if isinstance(value, str):
        return value.format_map(names) if "{" in value else value
    if isinstance(value, Ref):
        return captured[value.name]
    if isinstance(value, Derived):
        return value.compute(captured[value.name])
    if isinstance(value, Batch):
        return _batch_bytes(value, captured)
    if isinstance(value, Mapping):
        return {k: resolve(v, names, captured) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [resolve(v, names, captured) for v in value]
    return value


# ---------------------------------------------------------------------------------------------- plain data


def plain(value: Any) -> Any:
    """Dicts, lists and scalars: timedeltas in ms, uuids as strings, record batches as their records."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain_field(f, getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).hex()
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    return value


def _plain_field(f: dataclasses.Field[Any], value: Any) -> Any:
    if f.metadata.get("kafka_type") == "records" and value is not None:
        return _records(bytes(value))
    return plain(value)


def _records(data: bytes) -> list[dict[str, Any]]:
    out = []
    for position, header in iter_batches(data):
        _h, records = decode_batch(data, position)
        out.append({
            "base_offset": header.base_offset, "producer_id": header.producer_id,
            "producer_epoch": header.producer_epoch, "base_sequence": header.base_sequence,
            "transactional": header.is_transactional, "control": header.is_control,
            "records": [{"offset": r.offset, "key": r.key, "value": r.value, "headers": r.headers}
                        for r in records],
        })
    return out


def _known(api_key: int, version: int) -> bool:
    try:
        entity_schemas(api_key, version)
    except Exception:  # kio's UnknownAPIKey / UnknownEntity: no schema for this key or version
        return False
    return True


def _newest_flexible(api_key: int) -> bool:
    known = [v for v in range(32) if _known(api_key, v)]
    return bool(known) and entity_schemas(api_key, known[-1]).flexible_request


def _get(tree: Any, path: str) -> Any:
    for part in path.split("."):
        tree = tree[int(part)] if isinstance(tree, list) else tree[part]
    return tree


# ---------------------------------------------------------------------------------------------- running


class _Session:
    def __init__(self, target: Target, scenario: Scenario) -> None:
        self.target = target
        self.names = _names(scenario, target)
        self.captured: dict[str, Any] = {}
        self.conns: dict[int | str | None, BlockingConnection] = {}

    def connection(self, to: int | str | None = None) -> BlockingConnection:
        if to == "controller":
            to = self._controller()
        elif to == "not-controller":
            controller = self._controller()
            to = min(node for node in self.target.peers if node != controller)
        conn = self.conns.get(to)
        if conn is None:
            host, port = (self.target.peers[to] if isinstance(to, int) else
                          f"{self.target.host}:{self.target.port}").rsplit(":", 1)
            conn = self.conns[to] = BlockingConnection(host, int(port), "differential", timeout=REQUEST_TIMEOUT_S)
            if isinstance(to, str):  # a login: its handshake and token, on this connection before anything else
                for call in self.target.logins[to]:
                    response = self.send(Call(call.api_key, call.version, call.body, to=to))
                    if isinstance(response, Closed) or response["error_code"] != 0:
                        raise AssertionError(f"{self.target.name}: login as {to} failed: {response}")
        return conn

    def _controller(self) -> int:
        response = self.step(Call(3, 12, {"topics": []}, until=lambda r: r["controller_id"] >= 0))
        return int(response["controller_id"])

    def close(self, to: int | str | None = None, *, everything: bool = True) -> None:
        for key in list(self.conns) if everything else [to]:
            conn = self.conns.pop(key, None)
            if conn is not None:
                conn.close()

    def send(self, call: Call, raw: bytes | None = None) -> Any:
        """The plain response, or :class:`Closed` when the broker hangs up (the connection is then reopened)."""
        if call.api_key in CONTROLLER_VERSIONS:  # kio has no schemas for these: odradek's own codec
            return self._exchange(call, encode_body(call.body), True, True,
                                  lambda frame, offset: decode_response(call.api_key, frame[offset:]))
        if raw is not None and not _known(call.api_key, call.version):
            # a version (or key) no schema has: the header a client sends for a version newer than it knows of
            # (v2 where the API's newest known version is flexible), and only ApiVersions may answer (KIP-511's v0)
            v0 = entity_schemas(18, 0).response
            return self._exchange(call, raw, _newest_flexible(call.api_key), False,
                                  lambda frame, offset: decode_entity(v0, frame, offset))
        schemas = entity_schemas(call.api_key, call.version)
        if raw is None:
            body: Any = encode_entity(build(schemas.request, resolve(call.body, self.names, self.captured)))
        else:
            body = raw
        return self._exchange(call, body, schemas.flexible_request, schemas.flexible_response,
                              lambda frame, offset: decode_entity(schemas.response, frame, offset))

    def _exchange(self, call: Call, body: Any, flexible_request: bool, flexible_response: bool,
                  decode: Callable[[memoryview, int], Any]) -> Any:
        try:
            frame, offset = self.connection(call.to).request(call.api_key, call.version, body,
                                                             flexible_request=flexible_request,
                                                             flexible_response=flexible_response)
        except (ConnectionError, OSError):
            self.close()
            return Closed()
        return plain(decode(frame, offset))

    def step(self, call: Call | Act) -> Any:
        if isinstance(call, Act):
            if self.target.actor is None:
                raise AssertionError(f"{self.target.name}: {call} needs a cluster")
            self.target.actor.act(call)
            self.close(call.broker, everything=False)
            return None
        deadline = time.monotonic() + SETUP_DEADLINE_S
        while True:
            response = self.send(call)
            if call.until is None or (not isinstance(response, Closed) and call.until(response)):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.target.name}: setup step {call.api_key}v{call.version} never held: "
                                     f"{response}")
            time.sleep(0.1)
        if call.capture:
            if isinstance(response, Closed):
                raise AssertionError(f"{self.target.name}: connection closed in setup {call}")
            for name, path in call.capture.items():
                self.captured[name] = _get(response, path)
        return response


def _whole(topic: Topic, partitions: list[dict[str, Any]]) -> bool:
    if not topic.replicas:
        return len(partitions) == topic.partitions and all(p["leader_id"] >= 0 for p in partitions)
    return len(partitions) == len(topic.replicas) and all(
        p["leader_id"] >= 0 and sorted(p["isr_nodes"]) == sorted(topic.replicas[p["partition_index"]])
        for p in partitions)


def _create(topic: Topic, target: Target) -> list[Call]:
    """CreateTopics, then Metadata until the topic is whole: on every broker of a cluster (so a follower knows it is
    one), its ISR full when the replicas were given."""
    name = "{topic}" + topic.suffix
    shape: dict[str, Any] = {"num_partitions": topic.partitions, "replication_factor": 1}
    if topic.replicas:
        shape = {"num_partitions": -1, "replication_factor": -1, "assignments": [
            {"partition_index": i, "broker_ids": list(r)} for i, r in enumerate(topic.replicas)]}
    create = Call(19, 5, {"topics": [{"name": name, **shape, "configs": [
        {"name": k, "value": v} for k, v in topic.configs.items()]}], "timeout": 30000},
        until=lambda r: r["topics"][0]["error_code"] in (0, 36),
        to="controller" if target.peers else target.admin)  # a ZooKeeper-mode Kafka elsewhere: NOT_CONTROLLER
    ready = [Call(3, 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False},
                  until=lambda r: r["topics"][0]["error_code"] == 0 and _whole(topic, r["topics"][0]["partitions"]),
                  to=to) for to in (sorted(target.peers) or [target.admin])]
    return [create, *ready]


def _keep_own(response: Any, path: str, names: set[str]) -> None:
    *parents, last = path.split(".")
    holder = _get(response, ".".join(parents)) if parents else response
    holder[last] = [e for e in holder[last] if any(isinstance(v, str) and v in names for v in e.values())]


def run_scenario(target: Target, scenario: Scenario) -> Any:
    """Setup steps, then the request; the plain response (or :class:`Closed`)."""
    session = _Session(target, scenario)
    try:
        for topic in scenario.topics:
            for call in _create(topic, target):
                session.step(call)
        for call in scenario.setup:
            session.step(call)
        response = session.send(scenario.request, scenario.raw)
        if scenario.own and not isinstance(response, Closed):
            _keep_own(response, scenario.own, {v for k, v in session.names.items() if k != "broker"})
        return response
    finally:
        session.close()
        if target.actor is not None and target.actor.restore():
            settle(target)
        if target.teardown:
            _steps(target, target.teardown)


def _steps(target: Target, calls: tuple[Call, ...]) -> None:
    session = _Session(target, Scenario("steps", Call(3, 12)))
    try:
        for call in calls:
            session.step(call)
    finally:
        session.close()


def settle(target: Target) -> None:
    """Until every broker of the cluster lists every broker (a restarted one has rejoined, and each has heard)."""
    count = len(target.peers)
    _steps(target, tuple(Call(3, 12, {"topics": []}, until=lambda r: len(r["brokers"]) == count, to=node)
                         for node in sorted(target.peers)))

