"""Where and how Kafka's ZooKeeper-era brokers keep ACLs (``kafka.zk.ZkAclStore``, ``AclEntry``), so zkCli and
a Kafka tool see what a Kafka cluster would have written.

* LITERAL patterns: ``/kafka-acl/<ResourceType>/<name>``; PREFIXED: ``/kafka-acl-extended/prefixed/<ResourceType>/
  <name>`` (resource types spelled ``Topic``, ``Group``, ``Cluster``, ``TransactionalId``), each holding
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``;
  a pattern without ACLs has no znode.
* Change notifications, persistent sequential znodes ``acl_changes_<seq>``: under ``/kafka-acl-changes`` for a
  literal pattern, holding ``TOPIC:name`` (the resource type's enum name, a colon, the name); under
  ``/kafka-acl-extended-changes`` for the others, holding
  ``{"version":1,"resourceType":"TOPIC","name":"foo","patternType":"PREFIXED"}``.
"""

from __future__ import annotations

import json
from typing import Any

from odradek.security.acl import AccessControlEntry, Operation, PatternType, Permission, ResourcePattern, ResourceType

LITERAL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"

STORED_TYPES: tuple[ResourceType, ...] = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                          ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN,
                                          ResourceType.USER)
STORED_PATTERNS: tuple[PatternType, ...] = (PatternType.LITERAL, PatternType.PREFIXED)


class AclZnodeError(ValueError):
    """Bytes that are not what Kafka writes in an ACL znode or notification."""


def pattern_root(pattern_type: PatternType) -> str:
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ROOT
    return f"{EXTENDED_ROOT}/{pattern_type.name.lower()}"


def type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{pattern_root(pattern_type)}/{resource_type.pascal}"


def resource_path(pattern: ResourcePattern) -> str:
    return f"{type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def changes_path(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type is PatternType.LITERAL else EXTENDED_CHANGES


def layout_paths() -> list[str]:
    """What Kafka's ``createAclPaths`` makes: both roots with a child per resource type, both change paths."""
    paths = [type_path(p, t) for p in STORED_PATTERNS for t in STORED_TYPES]
    return [*paths, LITERAL_CHANGES, EXTENDED_CHANGES]


def encode_acls(entries: frozenset[AccessControlEntry]) -> bytes:
    ordered = sorted(entries, key=lambda e: (e.principal, e.permission, e.operation, e.host))
    return json.dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": e.permission.pascal, "operation": e.operation.pascal,
         "host": e.host} for e in ordered
    ]}, separators=(",", ":")).encode()


def _load(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise AclZnodeError(f"not JSON: {exc}") from None


def decode_acls(data: bytes) -> frozenset[AccessControlEntry]:
    if not data:
        return frozenset()
    js = _load(data)
    if not isinstance(js, dict) or js.get("version") != 1 or not isinstance(js.get("acls"), list):
        raise AclZnodeError("expected {\"version\":1,\"acls\":[...]}")
    out = set()
    for item in js["acls"]:
        try:
            principal = item["principal"]
            if ":" not in principal:
                raise AclZnodeError(f"bad principal {principal!r}")
            out.add(AccessControlEntry(principal, str(item["host"]), Operation(Operation.parse(item["operation"])),
                                       Permission(Permission.parse(item["permissionType"]))))
        except (KeyError, TypeError, ValueError) as exc:
            raise AclZnodeError(f"bad ACL entry {item!r}: {exc}") from None
    return frozenset(out)


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name, "name": pattern.name,
                       "patternType": pattern.pattern_type.name}, separators=(",", ":")).encode()


def decode_change(pattern_type: PatternType, data: bytes) -> ResourcePattern:
    """The pattern a notification names; ``pattern_type`` says which change path it came from."""
    try:
        if pattern_type is PatternType.LITERAL:
            kind, sep, name = data.decode().partition(":")
            if not sep:
                raise AclZnodeError(f"expected ResourceType:ResourceName, got {data[:100]!r}")
            return ResourcePattern(ResourceType(ResourceType.parse(kind)), name, PatternType.LITERAL)
        js = _load(data)
        if not isinstance(js, dict) or js.get("version") != 1:
            raise AclZnodeError("unsupported ACL change event version")
        return ResourcePattern(ResourceType(ResourceType.parse(js["resourceType"])), str(js["name"]),
                               PatternType(PatternType.parse(js["patternType"])))
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, AclZnodeError):
            raise
        raise AclZnodeError(f"bad ACL change notification {data[:100]!r}: {exc}") from None
