"""Kafka's znode layout and the JSON in each znode, typed, so zkCli shows what a Kafka broker would have
written.

Field names, version numbers and quirks follow Kafka's ZooKeeper-era brokers (``kafka.zk.ZkData``): the
controller's ``timestamp`` and a broker's ``timestamp`` are strings of milliseconds, ``/cluster/id`` has
``"version":"1"`` as a string, ``/controller_epoch`` is a bare decimal number, topic assignments key
partitions by decimal strings.

Every decoder takes the znode's path and raises :class:`ZnodeDataError` (carrying that path and the raw
bytes) for malformed or unexpected content; :func:`decode_or_skip` turns that into a logged warning and
``None`` for callers that should skip a bad znode rather than stop, because one hand-edited znode must not
crash a controller.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from odradek.coordination.store import CoordinationError, Session
from odradek.placement.model import TopicPartition

__all__ = [
    "ADMIN",
    "BROKERS",
    "BROKER_IDS",
    "BROKER_SEQID",
    "CLUSTER",
    "CLUSTER_ID",
    "CONFIG",
    "CONFIG_CHANGES",
    "CONFIG_CHANGE_PREFIX",
    "CONFIG_CLIENTS",
    "CONFIG_TOPICS",
    "CONFIG_USERS",
    "CONTROLLER",
    "CONTROLLER_EPOCH",
    "DELETE_TOPICS",
    "FEATURE",
    "ISR_CHANGE_NOTIFICATION",
    "ISR_CHANGE_PREFIX",
    "LOG_DIR_EVENT_NOTIFICATION",
    "LOG_DIR_EVENT_PREFIX",
    "PERSISTENT_PATHS",
    "PREFERRED_REPLICA_ELECTION",
    "REASSIGN_PARTITIONS",
    "TOPICS",
    "BrokerRegistration",
    "ClusterId",
    "ConfigChangeNotification",
    "ControllerRegistration",
    "Endpoint",
    "EntityConfig",
    "FeatureZnode",
    "IsrChangeNotification",
    "LogDirEventNotification",
    "PartitionReassignment",
    "PartitionState",
    "PreferredReplicaElection",
    "TopicAssignment",
    "TopicConfig",
    "TopicPartition",
    "ZnodeDataError",
    "broker_path",
    "decode_controller_epoch",
    "decode_or_skip",
    "decode_topic_id",
    "delete_topic_path",
    "encode_controller_epoch",
    "encode_topic_id",
    "ensure_kafka_layout",
    "entity_config_path",
    "generate_broker_id",
    "partition_path",
    "partition_state_path",
    "partitions_path",
    "read_all_topic_configs",
    "read_topic_configs",
    "read_topic_ids",
    "sequence_number",
    "topic_config_path",
    "topic_path",
]

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------------- paths

BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQID = "/brokers/seqid"
"""Persistent and empty: its data version, bumped by each write, hands out generated broker ids."""
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "/isr_change_notification/isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "/log_dir_event_notification/log_dir_event_"
LOG_DIR_FAILURE_EVENT = 1
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_CLIENTS = "/config/clients"
CONFIG_USERS = "/config/users"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "/config/changes/config_change_"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
FEATURE = "/feature"
"""Written by Kafka's controller (KIP-584), never by odradek's: ``status`` 1 (enabled) says that controller runs
``inter.broker.protocol.version`` 2.7 or newer, 0 (disabled) that it runs an older one."""

PERSISTENT_PATHS: tuple[str, ...] = (
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS,
    CONFIG_CLIENTS,
    CONFIG_USERS,
    "/config/brokers",
)
"""What a Kafka broker makes sure exists at startup, so watches on these parents can always be set."""


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    """An empty znode whose name is the topic an operator asked to delete."""
    return f"{DELETE_TOPICS}/{topic}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def entity_config_path(entity_path: str) -> str:
    """``/config/{entity_path}``: ``clients/<id>``, ``users/<user>``, ``users/<user>/clients/<id>`` (sanitized
    names, ``<default>`` for a default entity), the same ``entity_path`` a change notification carries."""
    return f"{CONFIG}/{entity_path}"


def sequence_number(path: str, prefix: str) -> str:
    """The ten-digit suffix of a sequential znode such as ``isr_change_0000000042``."""
    name = path.rsplit("/", 1)[-1]
    prefix_name = prefix.rsplit("/", 1)[-1]
    if not name.startswith(prefix_name):
        raise ValueError(f"{path} is not a {prefix_name}* znode")
    return name[len(prefix_name) :]


async def ensure_kafka_layout(session: Session) -> None:
    for path in PERSISTENT_PATHS:
        await session.ensure_path(path)


async def read_topic_configs(session: Session, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    """``/config/topics/{topic}`` overrides of each topic that has them (topics without a znode are left out)."""
    names = sorted(set(topics))
    if not names:
        return {}
    results = await session.get_many([topic_config_path(t) for t in names])
    out: dict[str, dict[str, str]] = {}
    for topic, result in zip(names, results, strict=True):
        if isinstance(result, tuple):
            parsed = decode_or_skip(TopicConfig.from_json, result[0], topic_config_path(topic))
            if parsed is not None:
                out[topic] = dict(parsed.config)
    return out


async def read_all_topic_configs(session: Session) -> dict[str, dict[str, str]]:
    return await read_topic_configs(session, await session.children(CONFIG_TOPICS))


async def read_topic_ids(session: Session, topics: Iterable[str]) -> dict[str, uuid.UUID]:
    """The ids recorded in the topics' assignment znodes (a topic written by an older tool may have none)."""
    names = sorted(set(topics))
    if not names:
        return {}
    out: dict[str, uuid.UUID] = {}
    results = await session.get_many([topic_path(t) for t in names])
    for topic, result in zip(names, results, strict=True):
        if isinstance(result, tuple):
            parsed = decode_or_skip(TopicAssignment.from_json, result[0], topic_path(topic))
            if parsed is not None and parsed.topic_id:
                with contextlib.suppress(ValueError):
                    out[topic] = decode_topic_id(parsed.topic_id)
    return out


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """A topic id as Kafka's ``Uuid.toString`` writes it into ``/brokers/topics/{topic}``: the 16 bytes in URL-safe
    base64 without padding (22 characters). Kafka's controller cannot read the dashed hexadecimal form."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    """Kafka's form (see :func:`encode_topic_id`), or the dashed hexadecimal form odradek wrote before it wrote
    Kafka's; raises ``ValueError`` for anything else."""
    if len(text) == 22:
        try:
            return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
        except (binascii.Error, ValueError):
            raise ValueError(f"not a topic id: {text!r}") from None
    return uuid.UUID(text)


async def generate_broker_id(session: Session, reserved_broker_max_id: int = 1000) -> int:
    """Kafka's ``broker.id.generation.enable``: each write to ``/brokers/seqid`` bumps its version, and the new
    version above ``reserved.broker.max.id`` is the id; ZooKeeper's atomic version bump makes ids unique."""
    await session.ensure_path(BROKER_SEQID)
    stat = await session.set(BROKER_SEQID, b"")
    return reserved_broker_max_id + stat.version


# ---------------------------------------------------------------------------------------------- errors


class ZnodeDataError(CoordinationError):
    """A znode whose bytes are not the JSON Kafka writes there."""

    def __init__(self, path: str | None, reason: str, raw: bytes | None = None) -> None:
        super().__init__(path, f"malformed znode data ({reason})")
        self.reason = reason
        self.raw = raw


T = TypeVar("T")


def decode_or_skip(decode: Callable[[bytes, str], T], data: bytes, path: str) -> T | None:
    """Decode, or log the bad znode with its path and return ``None`` so the caller can carry on."""
    try:
        return decode(data, path)
    except ZnodeDataError as error:
        log.warning("skipping %s: %s; data=%r", path, error.reason, (error.raw or b"")[:200])
        return None


class _Json:
    """Typed reads from a parsed JSON object; every failure names the znode."""

    def __init__(self, data: bytes, path: str) -> None:
        self.path = path
        self.raw = data
        try:
            parsed = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ZnodeDataError(path, f"not JSON: {exc}", data) from None
        if not isinstance(parsed, dict):
            raise ZnodeDataError(path, "expected a JSON object", data)
        self.obj: dict[str, Any] = parsed

    def fail(self, reason: str) -> ZnodeDataError:
        return ZnodeDataError(self.path, reason, self.raw)

    def has(self, key: str) -> bool:
        return self.obj.get(key) is not None

    def integer(self, key: str, value: Any = None) -> int:
        value = self.obj.get(key) if value is None else value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} must be an integer, got {value!r}")
        return value

    def integer_like(self, key: str) -> int:
        """An integer that Kafka writes as a string (timestamps) but older writers wrote as a number."""
        value = self.obj.get(key)
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                raise self.fail(f"{key!r} must be a decimal string, got {value!r}") from None
        return self.integer(key, value)

    def string(self, key: str, value: Any = None) -> str:
        value = self.obj.get(key) if value is None else value
        if not isinstance(value, str):
            raise self.fail(f"{key!r} must be a string, got {value!r}")
        return value

    def opt_string(self, key: str) -> str | None:
        return None if self.obj.get(key) is None else self.string(key)

    def integers(self, key: str, value: Any = None) -> list[int]:
        value = self.obj.get(key) if value is None else value
        if not isinstance(value, list):
            raise self.fail(f"{key!r} must be a list of integers, got {value!r}")
        return [self.integer(key, v) for v in value]

    def obj_of(self, key: str, value: Any = None, *, required: bool = True) -> dict[str, Any]:
        value = self.obj.get(key) if value is None else value
        if value is None and not required:
            return {}
        if not isinstance(value, dict):
            raise self.fail(f"{key!r} must be an object, got {value!r}")
        return value

    def list_of_objs(self, key: str) -> list[dict[str, Any]]:
        value = self.obj.get(key)
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise self.fail(f"{key!r} must be a list of objects, got {value!r}")
        return value

    def version(self, supported: Iterable[int]) -> int:
        version = self.integer("version")
        if version not in supported:
            raise self.fail(f"unsupported version {version}")
        return version

    def partition_map(self, key: str, value: Any) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for name, replicas in self.obj_of(key, value).items():
            try:
                partition = int(name)
            except ValueError:
                raise self.fail(f"{key!r} has a non-numeric partition {name!r}") from None
            out[partition] = self.integers(key, replicas)
        return out


def _dump(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def _partition_list(js: _Json) -> frozenset[TopicPartition]:
    out = set()
    for entry in js.list_of_objs("partitions"):
        out.add(TopicPartition(js.string("topic", entry.get("topic")), js.integer("partition", entry.get("partition"))))
    return frozenset(out)


def _partition_list_json(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(partitions)]


# --------------------------------------------------------------------------------------------- brokers


@dataclass(frozen=True, slots=True)
class Endpoint:
    listener: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """``LISTENER://host:port``; IPv6 hosts in brackets; an empty host means all interfaces."""
        listener, sep, rest = text.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon or not listener or not port.isdigit():
            raise ValueError(f"not an endpoint: {text!r}")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        return cls(listener, host, int(port))

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """``/brokers/ids/{id}``, ephemeral: how clients and the controller reach a live broker.

    Written as version 4 (multiple listeners, rack, listener security protocol map) like Kafka 0.10 to 2.6;
    versions 1 to 5 are read. ``host``/``port`` repeat the first PLAINTEXT endpoint for old clients.
    """

    broker_id: int
    endpoints: tuple[Endpoint, ...]
    listener_security_protocol_map: Mapping[str, str] = field(default_factory=dict)
    rack: str | None = None
    jmx_port: int = -1
    timestamp: int = 0
    version: int = 4
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    http_port: int = -1
    """odradek's own field: the port of the broker's metrics and console HTTP server (-1: none). Kafka's readers
    ignore fields they do not know; the console uses it to gather every broker's view."""

    @property
    def host(self) -> str | None:
        plaintext = self._plaintext()
        return plaintext.host if plaintext else None

    @property
    def port(self) -> int:
        plaintext = self._plaintext()
        return plaintext.port if plaintext else -1

    def _plaintext(self) -> Endpoint | None:
        for endpoint in self.endpoints:
            if self.listener_security_protocol_map.get(endpoint.listener, endpoint.listener) == "PLAINTEXT":
                return endpoint
        return None

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "listener_security_protocol_map": dict(self.listener_security_protocol_map)
            or {e.listener: e.listener for e in self.endpoints},
            "endpoints": [str(e) for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "host": self.host,
            "timestamp": str(self.timestamp),
            "port": self.port,
            "version": self.version,
        }
        if self.rack is not None:
            doc["rack"] = self.rack
        if self.version >= 5:
            doc["features"] = {name: dict(r) for name, r in self.features.items()}
        if self.http_port >= 0:
            doc["http_port"] = self.http_port
        return _dump(doc)

    @classmethod
    def from_json(cls, data: bytes, path: str) -> BrokerRegistration:
        js = _Json(data, path)
        try:
            broker_id = int(path.rsplit("/", 1)[-1])
        except ValueError:
            raise js.fail("the znode name is not a broker id") from None
        version = js.version(range(1, 6))
        jmx_port = js.integer("jmx_port") if js.has("jmx_port") else -1
        protocol_map: dict[str, str] = {}
        if version == 1:
            endpoints: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", js.string("host"), js.integer("port")),)
        else:
            for listener, protocol in js.obj_of("listener_security_protocol_map", required=False).items():
                protocol_map[listener] = js.string("listener_security_protocol_map", protocol)
            raw = js.obj.get("endpoints")
            if not isinstance(raw, list):
                raise js.fail(f"'endpoints' must be a list, got {raw!r}")
            try:
                endpoints = tuple(Endpoint.parse(js.string("endpoints", e)) for e in raw)
            except ValueError as exc:
                raise js.fail(str(exc)) from None
        if not protocol_map:  # before the map existed, listener names were security protocol names
            protocol_map = {e.listener: e.listener for e in endpoints}
        features: dict[str, dict[str, int]] = {}
        for name, ranges in js.obj_of("features", required=False).items():
            features[name] = {k: js.integer("features", v) for k, v in js.obj_of("features", ranges).items()}
        return cls(
            broker_id=broker_id,
            endpoints=endpoints,
            listener_security_protocol_map=protocol_map,
            rack=js.opt_string("rack"),
            jmx_port=jmx_port,
            timestamp=js.integer_like("timestamp") if js.has("timestamp") else 0,
            version=version,
            features=features,
            http_port=js.integer("http_port") if js.has("http_port") else -1,
        )


# ------------------------------------------------------------------------------------------ controller


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    """``/controller``, ephemeral: who won the election (seed 001 section 9,
    ``ZookeeperLeaderElector.elect``)."""

    broker_id: int
    timestamp: int

    def to_json(self) -> bytes:
        return _dump({"version": 1, "brokerid": self.broker_id, "timestamp": str(self.timestamp)})

    @classmethod
    def from_json(cls, data: bytes, path: str = CONTROLLER) -> ControllerRegistration:
        js = _Json(data, path)
        return cls(js.integer("brokerid"), js.integer_like("timestamp") if js.has("timestamp") else 0)


def encode_controller_epoch(epoch: int) -> bytes:
    """``/controller_epoch``: the epoch as bare decimal text; its znode version fences zombie controllers."""
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes, path: str = CONTROLLER_EPOCH) -> int:
    text = data.decode("ascii", "replace").strip()
    if not text.lstrip("-").isdigit():
        raise ZnodeDataError(path, f"controller epoch must be an integer, got {text!r}", data)
    return int(text)


# ---------------------------------------------------------------------------------------------- topics


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/{topic}``: partition -> replicas (first is preferred), with in-flight reassignment
    sets; ``topic_id`` is the text of the znode's ``topic_id`` (see :func:`encode_topic_id`)."""

    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    topic_id: str | None = None

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "version": 3 if self.topic_id else 2,
            "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
            "adding_replicas": {str(p): list(r) for p, r in sorted(self.adding_replicas.items()) if r},
            "removing_replicas": {str(p): list(r) for p, r in sorted(self.removing_replicas.items()) if r},
        }
        if self.topic_id:
            try:  # an id odradek wrote in the dashed form is rewritten in Kafka's
                doc["topic_id"] = encode_topic_id(decode_topic_id(self.topic_id))
            except ValueError:
                doc["topic_id"] = self.topic_id
        return _dump(doc)

    @classmethod
    def from_json(cls, data: bytes, path: str) -> TopicAssignment:
        js = _Json(data, path)
        js.version(range(1, 4))

        def tuples(key: str) -> dict[int, tuple[int, ...]]:
            raw = js.obj.get(key)
            if raw is None:
                return {}
            return {p: tuple(r) for p, r in js.partition_map(key, raw).items()}

        return cls(
            partitions=tuples("partitions"),
            adding_replicas=tuples("adding_replicas"),
            removing_replicas=tuples("removing_replicas"),
            topic_id=js.opt_string("topic_id"),
        )


@dataclass(frozen=True, slots=True)
class PartitionState:
    """``/brokers/topics/{t}/partitions/{p}/state``: leader, leader epoch, ISR and the controller epoch that
    wrote it.

    The znode's own version (the ``zkVersion`` of Kafka's ``LeaderAndIsr``) is not in the JSON; it comes from
    the stat and is what compare-and-set uses. ``leader_recovery_state`` (KIP-704, IBP 3.2+) is written only when
    it is not 0 (RECOVERED), as Kafka does: 1 (RECOVERING) follows an unclean election.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = 0

    def to_json(self) -> bytes:
        doc: dict[str, Any] = {
            "controller_epoch": self.controller_epoch,
            "leader": self.leader,
            "version": 1,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state:
            doc["leader_recovery_state"] = self.leader_recovery_state
        return _dump(doc)

    @classmethod
    def from_json(cls, data: bytes, path: str) -> PartitionState:
        js = _Json(data, path)
        js.version((1,))
        recovery = js.integer("leader_recovery_state") if js.has("leader_recovery_state") else 0
        if recovery not in (0, 1):
            raise js.fail(f"unknown leader_recovery_state {recovery}")
        return cls(
            js.integer("leader"),
            js.integer("leader_epoch"),
            tuple(js.integers("isr")),
            js.integer("controller_epoch"),
            recovery,
        )


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """``/config/topics/{topic}``: per-topic overrides of broker defaults, every value a string."""

    config: Mapping[str, str]

    def to_json(self) -> bytes:
        return _dump({"version": 1, "config": dict(self.config)})

    @classmethod
    def from_json(cls, data: bytes, path: str) -> TopicConfig:
        js = _Json(data, path)
        js.version((1,))
        return cls({k: js.string(f"config.{k}", v) for k, v in js.obj_of("config").items()})


@dataclass(frozen=True, slots=True)
class EntityConfig:
    """``/config/clients/...``, ``/config/users/...``: an entity's dynamic configs, Kafka's ``{"version":1,
    "config":{...}}`` with string values. A user's znode holds both its quotas and its SCRAM credentials, so a
    writer changes only its own keys and keeps the others (read, change, write back with the version read)."""

    config: Mapping[str, str]

    def to_json(self) -> bytes:
        return _dump({"version": 1, "config": dict(self.config)})

    @classmethod
    def from_json(cls, data: bytes, path: str) -> EntityConfig:
        if not data:  # Kafka creates intermediate znodes (``/config/users/<u>/clients``) empty
            return cls({})
        js = _Json(data, path)
        js.version((1,))
        return cls({k: js.string(f"config.{k}", v) for k, v in js.obj_of("config").items()})


@dataclass(frozen=True, slots=True)
class ConfigChangeNotification:
    """``/config/changes/config_change_{seq}``: tells every broker which entity's config to re-read."""

    entity_path: str

    def to_json(self) -> bytes:
        return _dump({"version": 2, "entity_path": self.entity_path})

    @classmethod
    def from_json(cls, data: bytes, path: str) -> ConfigChangeNotification:
        js = _Json(data, path)
        if js.version((1, 2)) == 1:
            return cls(f"{js.string('entity_type')}/{js.string('entity_name')}")
        return cls(js.string("entity_path"))


@dataclass(frozen=True, slots=True)
class ClusterId:
    """``/cluster/id``; Kafka writes ``"version"`` as the string ``"1"`` here, unlike everywhere else."""

    id: str

    def to_json(self) -> bytes:
        return _dump({"version": "1", "id": self.id})

    @classmethod
    def from_json(cls, data: bytes, path: str = CLUSTER_ID) -> ClusterId:
        return cls(_Json(data, path).string("id"))


# ----------------------------------------------------------------------------------------------- admin


@dataclass(frozen=True, slots=True)
class FeatureZnode:
    """``/feature`` (Kafka's ``FeatureZNode``): the cluster's finalized feature levels and whether the controller
    that wrote it has feature versioning enabled (IBP 2.7 or newer). Version 1 gives each feature a
    ``min_version_level`` and a ``max_version_level``, version 2 (IBP 3.3 and newer) only the maximum; ``features``
    holds the maximum of each."""

    version: int
    enabled: bool
    features: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        levels = {name: ({"max_version_level": level, "min_version_level": level} if self.version == 1
                         else {"max_version_level": level}) for name, level in sorted(self.features.items())}
        return _dump({"features": levels, "version": self.version, "status": 1 if self.enabled else 0})

    @classmethod
    def from_json(cls, data: bytes, path: str = FEATURE) -> FeatureZnode:
        js = _Json(data, path)
        version = js.version((1, 2))
        status = js.integer("status")
        if status not in (0, 1):
            raise js.fail(f"malformed status {status}")
        features = {name: js.integer("features", js.obj_of("features", levels).get("max_version_level"))
                    for name, levels in js.obj_of("features", required=False).items()}
        return cls(version, status == 1, features)


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """``/admin/reassign_partitions``: the target replicas an operator asked for, per partition."""

    partitions: Mapping[TopicPartition, tuple[int, ...]]

    def to_json(self) -> bytes:
        return _dump(
            {
                "version": 1,
                "partitions": [
                    {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                    for tp, replicas in sorted(self.partitions.items())
                ],
            }
        )

    @classmethod
    def from_json(cls, data: bytes, path: str = REASSIGN_PARTITIONS) -> PartitionReassignment:
        js = _Json(data, path)
        js.version((1,))
        out: dict[TopicPartition, tuple[int, ...]] = {}
        for entry in js.list_of_objs("partitions"):
            tp = TopicPartition(js.string("topic", entry.get("topic")), js.integer("partition", entry.get("partition")))
            if tp in out:
                raise js.fail(f"{tp.topic}-{tp.partition} appears twice")
            out[tp] = tuple(js.integers("replicas", entry.get("replicas")))
        return cls(out)


@dataclass(frozen=True, slots=True)
class PreferredReplicaElection:
    """``/admin/preferred_replica_election``: partitions whose leadership should move back to the first
    replica."""

    partitions: frozenset[TopicPartition]

    def to_json(self) -> bytes:
        return _dump({"version": 1, "partitions": _partition_list_json(self.partitions)})

    @classmethod
    def from_json(cls, data: bytes, path: str = PREFERRED_REPLICA_ELECTION) -> PreferredReplicaElection:
        js = _Json(data, path)
        js.version((1,))
        return cls(_partition_list(js))


@dataclass(frozen=True, slots=True)
class LogDirEventNotification:
    """``/log_dir_event_notification/log_dir_event_{seq}``: a broker saying one of its log directories failed
    (event 1, the only one Kafka defines); the controller then asks it which replicas are offline."""

    broker: int
    event: int = LOG_DIR_FAILURE_EVENT

    def to_json(self) -> bytes:
        return _dump({"version": 1, "broker": self.broker, "event": self.event})

    @classmethod
    def from_json(cls, data: bytes, path: str) -> LogDirEventNotification:
        js = _Json(data, path)
        js.version((1,))
        return cls(js.integer("broker"), js.integer("event"))


@dataclass(frozen=True, slots=True)
class IsrChangeNotification:
    """``/isr_change_notification/isr_change_{seq}``: a leader's batch of partitions whose ISR it changed."""

    partitions: frozenset[TopicPartition]

    def to_json(self) -> bytes:
        return _dump({"version": 1, "partitions": _partition_list_json(self.partitions)})

    @classmethod
    def from_json(cls, data: bytes, path: str) -> IsrChangeNotification:
        js = _Json(data, path)
        js.version((1,))
        return cls(_partition_list(js))
