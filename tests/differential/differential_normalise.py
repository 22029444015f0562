"""What legitimately differs between two brokers' answers, in one place, each rule with its reason; and the
field-by-field comparison that runs after it.

A rule matches a field by its path without array positions (``brokers.host``, ``*.throttle_time_ms``; ``*`` is any
run of characters). Values are replaced by a placeholder that says what they were, so a -1 or an empty string (the
"none" of Kafka's schemas) still has to agree: only real ids, hosts, ports and clocks are masked.

Arrays of entities with an identity field (a topic's name, a partition's index, an API key) are compared by that
identity, not by position: neither broker promises an order there, and a missing entry then reads as one difference
at its own path (``topics[d.x]``) rather than every later entry shifted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ABSENT", "RULES", "Diff", "Rule", "SelfIds", "compare", "glob", "normalise"]

ABSENT = "<absent>"

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_EPOCH_MS = re.compile(r"\b1[0-9]{12}\b")
_ZERO_UUID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class SelfIds:
    """What a broker calls itself: its node id, host and port (masked wherever they appear as its own)."""

    node_id: int
    host: str
    port: int
    peers: Mapping[int, int] = field(default_factory=dict)
    """On a cluster, every broker's port by its node id: a port is then masked as the broker it belongs to, and the
    active controller's id (chosen by a race between the brokers) is masked."""


@dataclass(frozen=True)
class Rule:
    pattern: str
    apply: Callable[[Any, SelfIds], Any]
    reason: str


def _mask(tag: str, keep: tuple[Any, ...] = (-1, 0, "", None)) -> Callable[[Any, SelfIds], Any]:
    """Replace a value by ``<tag>`` unless it is one of the "no value" sentinels, which must still agree."""
    def apply(value: Any, _ids: SelfIds) -> Any:
        return value if value in keep else f"<{tag}>"
    return apply


def _self_node(value: Any, ids: SelfIds) -> Any:
    if isinstance(value, list):
        return ["<self>" if v == ids.node_id else v for v in value]
    return "<self>" if value == ids.node_id else value


def _self_name(value: Any, ids: SelfIds) -> Any:
    return "<self>" if value == str(ids.node_id) else value


def _self_port(value: Any, ids: SelfIds) -> Any:
    if value == ids.port:
        return "<port>"
    return next((f"<port of {node}>" for node, port in ids.peers.items() if port == value), value)


def _controller(value: Any, ids: SelfIds) -> Any:
    return "<controller>" if ids.peers and isinstance(value, int) and value >= 0 else _self_node(value, ids)


_KAFKA_UUID = re.compile(r"^[A-Za-z0-9_-]{22}$")


def _member(value: Any, _ids: SelfIds) -> Any:
    return "<uuid>" if isinstance(value, str) and _KAFKA_UUID.match(value) else value


def _unordered(value: Any, _ids: SelfIds) -> Any:
    return sorted(value, key=repr) if isinstance(value, list) else value


def _uuid(value: Any, _ids: SelfIds) -> Any:
    return value if value in (_ZERO_UUID, None) else "<uuid>"


_NODE_FIELDS = ("node_id", "leader_id", "controller_id", "replica_nodes", "isr_nodes", "offline_replicas",
                "broker_id", "coordinator_id", "leader", "replicas", "isr", "brokers", "eligible_leader_replicas",
                "last_known_elr", "current_leader.leader_id", "coordinators.node_id")

RULES: tuple[Rule, ...] = (
    Rule("*throttle_time*", _mask("throttle"),
         "throttle times depend on quotas and load on the moment, not on the request"),
    Rule("cluster_id", _mask("cluster"), "each cluster has its own random id"),
    Rule("controller_id", _controller, "on a three-broker cluster, which broker becomes the controller is a race "
         "between them; on one broker, its own id"),
    *(Rule(f"*{name}", _self_node, "each broker has its own node id: its own id is masked, -1 and others compared")
      for name in _NODE_FIELDS),
    Rule("*resource_name", _self_name, "a broker resource is named by the broker's own node id"),
    Rule("*port", _self_port, "each broker listens on a free port of its own (on a cluster, named by its broker)"),
    Rule("*topic_id", _uuid, "topic ids are random per cluster (the zero id, meaning none, is compared)"),
    Rule("*member_id", _member, "KIP-848 member ids are random (Kafka's Uuid in base64); classic ones keep their "
         "client-id prefix and only the random UUID in them is masked"),
    Rule("*producer_id", _mask("producer-id", keep=(-1,)), "producer ids come from each cluster's own id blocks"),
    Rule("*session_id", _mask("session"), "fetch session ids are random per broker"),
    Rule("finalized_features_epoch", _mask("epoch"), "the epoch of each cluster's metadata, not of the request"),
    Rule("*log_append_time*", _mask("clock"), "the broker's clock when it appended"),
    Rule("*start_time*", _mask("clock"), "a broker clock (transaction and producer start times)"),
    Rule("*log_dir", _mask("dir"), "each broker's own log directory"),
    Rule("*acls", _unordered, "the ACLs of one resource or one filter come from a set: their order is not part of "
         "the answer (Kafka's varies from run to run)"),
    Rule("*usable_bytes", _mask("bytes"), "free disk space, which moves with every write on the machine"),
    Rule("*total_bytes", _mask("bytes"), "the size of the disk each broker's directory is on"),
)

IDENTITY_FIELDS = ("api_key", "node_id", "broker_id", "name", "topic", "topic_name", "partition_index", "index",
                   "partition", "partition_id", "group_id", "transactional_id", "resource_name", "key", "config_name")
"""Fields that identify an array's entries: such arrays are compared by identity, not position."""


def glob(pattern: str) -> re.Pattern[str]:
    """``*`` matches any run of characters; everything else (``[``, ``.``) is literal."""
    return re.compile("^" + re.escape(pattern).replace(r"\*", ".*") + "$")


_COMPILED = tuple((glob(r.pattern), r) for r in RULES)


def _strip_positions(path: str) -> str:
    return re.sub(r"\[[^\]]*\]", "", path)


def _strings(value: Any) -> Any:
    """Random UUIDs (member ids) and epoch milliseconds (a broker's clock quoted in a message) inside strings."""
    if isinstance(value, str):
        return _EPOCH_MS.sub("<ms>", _UUID.sub("<uuid>", value))
    return value


def normalise(tree: Any, ids: SelfIds, path: str = "") -> Any:
    """The tree with every rule applied (by path), and random UUIDs and clock readings inside strings masked."""
    bare = _strip_positions(path)
    for pattern, rule in _COMPILED:
        if path and pattern.match(bare):
            tree = rule.apply(tree, ids)
            break
    if isinstance(tree, dict):
        return {k: normalise(v, ids, f"{path}.{k}" if path else k) for k, v in tree.items()}
    if isinstance(tree, list):
        return [normalise(v, ids, f"{path}[{i}]") for i, v in enumerate(tree)]
    return _strings(tree)


def _identity(*lists: list[Any]) -> str | None:
    """The first identity field every entry of every list has, unique within each list."""
    items = [i for one in lists for i in one]
    if not items or not all(isinstance(i, dict) for i in items):
        return None
    for name in IDENTITY_FIELDS:
        if all(name in i for i in items) and all(
                len({repr(i[name]) for i in one}) == len(one) for one in lists):
            return name
    return None


@dataclass(frozen=True)
class Diff:
    path: str
    kafka: Any
    odradek: Any

    def __str__(self) -> str:
        return f"{self.path}: kafka={self.kafka!r} odradek={self.odradek!r}"


def _keyed(items: list[Any], name: str | None) -> dict[str, Any]:
    if name is None:
        return {str(i): v for i, v in enumerate(items)}
    return {str(v[name]): v for v in items}


def compare(kafka: Any, odradek: Any, path: str = "") -> list[Diff]:
    """Every field where the two normalised trees differ; arrays of identified entries compared by identity."""
    if isinstance(kafka, dict) and isinstance(odradek, dict):
        out: list[Diff] = []
        for k in list(kafka) + [k for k in odradek if k not in kafka]:
            sub = f"{path}.{k}" if path else k
            if k not in odradek or k not in kafka:
                out.append(Diff(sub, kafka.get(k, ABSENT), odradek.get(k, ABSENT)))
            else:
                out += compare(kafka[k], odradek[k], sub)
        return out
    if isinstance(kafka, list) and isinstance(odradek, list):
        name = _identity(kafka, odradek)
        if name is None and len(kafka) != len(odradek):
            return [Diff(f"{path}.length", len(kafka), len(odradek))] if not (
                kafka and odradek and isinstance(kafka[0], dict)) else _positional(kafka, odradek, path)
        left, right = _keyed(kafka, name), _keyed(odradek, name)
        out = []
        for k in list(left) + [k for k in right if k not in left]:
            sub = f"{path}[{k}]"
            if k not in right or k not in left:
                out.append(Diff(sub, ABSENT if k not in left else "<present>",
                                ABSENT if k not in right else "<present>"))
            else:
                out += compare(left[k], right[k], sub)
        return out
    return [] if kafka == odradek else [Diff(path, kafka, odradek)]


def _positional(kafka: list[Any], odradek: list[Any], path: str) -> list[Diff]:
    out = [Diff(f"{path}.length", len(kafka), len(odradek))]
    for i in range(min(len(kafka), len(odradek))):
        out += compare(kafka[i], odradek[i], f"{path}[{i}]")
    return out
