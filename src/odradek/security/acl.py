"""Kafka's ACL model and the decision it makes, as pure data and functions (no I/O, no clock).

The vocabulary is Kafka's, codes included (they travel in CreateAcls/DescribeAcls/DeleteAcls): resource types,
pattern types (LITERAL, PREFIXED; ANY and MATCH only in filters), operations and permission types. The decision
follows Kafka's AclAuthorizer and StandardAuthorizer, which agree:

* a super user may do anything;
* the ACLs that apply to a resource are those on its exact name (LITERAL), on the literal wildcard ``*``, and on
  every PREFIXED pattern its name starts with; when there are none at all (for any principal), the answer is
  ``allow.everyone.if.no.acl.found``;
* otherwise a DENY that matches the principal (or ``User:*``), the host (or ``*``) and the operation (or ALL)
  refuses, whatever ALLOWs say; else a matching ALLOW permits, where ALLOW of READ, WRITE, DELETE or ALTER also
  grants DESCRIBE, and ALLOW of ALTER_CONFIGS grants DESCRIBE_CONFIGS (only ALLOWs imply: DENY READ does not deny
  DESCRIBE); else refused.

:func:`authorize_any_of_type` is Kafka's ``authorizeByResourceType`` (does the principal have the operation on at
least one resource of a type, not denied by a dominant DENY), which InitProducerId uses for idempotent producers.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AccessControlEntry",
    "AclBinding",
    "AclBindingFilter",
    "AclIndex",
    "Operation",
    "PatternType",
    "Permission",
    "ResourcePattern",
    "ResourceType",
    "authorize",
    "authorize_any_of_type",
    "from_code",
    "parse_principal",
]

CLUSTER_NAME = "kafka-cluster"
"""The one name of the Cluster resource."""
WILDCARD = "*"
"""The literal resource name, and the host, that match any."""
WILDCARD_PRINCIPAL = "User:*"


def _pascal(name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: ``TRANSACTIONAL_ID`` -> ``TransactionalId``."""
    return "".join(part.capitalize() for part in name.split("_"))


class _Coded(enum.IntEnum):
    @property
    def pascal(self) -> str:
        """The name in ZooKeeper's JSON and paths (``Topic``, ``ClusterAction``, ``Allow``)."""
        return _pascal(self.name)

    @classmethod
    def parse(cls, text: str) -> _Coded:
        """From Kafka's names in either spelling (``ClusterAction``, ``CLUSTER_ACTION``) or ``cluster-action``."""
        key = text.strip().replace("-", "_")
        for member in cls:
            if key.upper() in (member.name, member.pascal.upper()):
                return member
        raise ValueError(f"unknown {cls.__name__} {text!r}")


E = TypeVar("E", bound="_Coded")


def from_code(cls: type[E], code: int) -> E:
    """Kafka's ``fromCode``: a code it does not know is UNKNOWN (0), which requests may not carry."""
    try:
        return cls(code)
    except ValueError:
        return cls(0)


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_IMPLIES_DESCRIBE = frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE,
                               Operation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})


def parse_principal(text: str) -> str:
    """Kafka's ``principalType:name`` (``User:alice``); anything else is refused, as SecurityUtils refuses it."""
    kind, sep, _ = text.partition(":")
    if not sep or not kind:
        raise ValueError(f"expected a string in format principalType:principalName but got {text!r}")
    return text


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: Operation
    permission: Permission


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls/DeleteAcls filters: None and ANY match anything; MATCH pattern type matches the patterns that
    would apply to a resource of that name (its literal, the ``*`` literal, and prefixes of it)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: Operation = Operation.ANY
    permission: Permission = Permission.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        return self.name.startswith(pattern.name)  # PREFIXED under MATCH

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is Operation.ANY or self.operation == entry.operation)
            and (self.permission is Permission.ANY or self.permission == entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def exact_patterns(self) -> list[ResourcePattern]:
        """The patterns this filter can only mean, when it names one resource (Kafka's ``matchesAtMostOne``
        pattern filter): DeleteAcls then reads them even if this broker's cache has not heard of them yet."""
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) or self.name is None:
            return []
        if self.pattern_type is PatternType.ANY:
            return [ResourcePattern(self.resource_type, self.name, PatternType.LITERAL),
                    ResourcePattern(self.resource_type, self.name, PatternType.PREFIXED)]
        if self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            return [ResourcePattern(self.resource_type, self.name, self.pattern_type)]
        return []


class AclIndex:
    """Every ACL the cluster has, by resource pattern (an immutable snapshot: a change makes a new index, sharing
    what did not change, so a broker with many ACLs pays a dictionary copy per change, not a rebuild)."""

    def __init__(self, acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]] | None = None) -> None:
        self.by_pattern: dict[ResourcePattern, frozenset[AccessControlEntry]] = {
            p: entries for p, entries in (acls or {}).items() if entries
        }
        prefixes: dict[ResourceType, set[str]] = {}
        for pattern in self.by_pattern:
            if pattern.pattern_type is PatternType.PREFIXED:
                prefixes.setdefault(pattern.resource_type, set()).add(pattern.name)
        self._prefixes: dict[ResourceType, frozenset[str]] = {t: frozenset(n) for t, n in prefixes.items()}

    def with_acls(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> AclIndex:
        """A new index where ``pattern`` has exactly ``entries`` (none: the pattern is gone)."""
        wanted = frozenset(entries)
        index = AclIndex.__new__(AclIndex)
        index.by_pattern = dict(self.by_pattern)
        if wanted:
            index.by_pattern[pattern] = wanted
        else:
            index.by_pattern.pop(pattern, None)
        index._prefixes = self._prefixes
        if pattern.pattern_type is PatternType.PREFIXED:
            names = set(self._prefixes.get(pattern.resource_type, ()))
            if wanted:
                names.add(pattern.name)
            else:
                names.discard(pattern.name)
            index._prefixes = {**self._prefixes, pattern.resource_type: frozenset(names)}
        return index

    def bindings(self) -> Iterable[AclBinding]:
        for pattern, entries in self.by_pattern.items():
            for entry in entries:
                yield AclBinding(pattern, entry)

    def matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The ACLs that apply to the resource ``name``: its literal, the literal ``*``, every prefix of it."""
        found: list[AccessControlEntry] = []
        for key in (ResourcePattern(resource_type, name), ResourcePattern(resource_type, WILDCARD)):
            found.extend(self.by_pattern.get(key, ()))
        prefixes = self._prefixes.get(resource_type)
        if prefixes:
            # the name's own prefixes, looked up: a cost in the name's length, not in the number of prefixed ACLs
            for end in range(1, len(name) + 1):
                if name[:end] in prefixes:
                    found.extend(self.by_pattern[ResourcePattern(resource_type, name[:end], PatternType.PREFIXED)])
        return found


def _applies(entry: AccessControlEntry, principal: str, host: str) -> bool:
    return entry.principal in (principal, WILDCARD_PRINCIPAL) and entry.host in (host, WILDCARD)


def _allow_grants(granted: Operation, wanted: Operation) -> bool:
    if granted is Operation.ALL or granted == wanted:
        return True
    if wanted is Operation.DESCRIBE:
        return granted in _IMPLIES_DESCRIBE
    if wanted is Operation.DESCRIBE_CONFIGS:
        return granted in _IMPLIES_DESCRIBE_CONFIGS
    return False


def authorize(index: AclIndex, principal: str, host: str, operation: Operation, resource_type: ResourceType,
              name: str, *, super_users: frozenset[str] = frozenset(), allow_if_no_acls: bool = False) -> bool:
    """Kafka's decision for one action on one literal resource."""
    if principal in super_users:
        return True
    acls = index.matching(resource_type, name)
    if not acls:
        return allow_if_no_acls
    allowed = False
    for entry in acls:
        if not _applies(entry, principal, host):
            continue
        if entry.permission is Permission.DENY:
            if entry.operation is Operation.ALL or entry.operation == operation:
                return False
        elif entry.permission is Permission.ALLOW and _allow_grants(entry.operation, operation):
            allowed = True
    return allowed


def authorize_any_of_type(index: AclIndex, principal: str, host: str, operation: Operation,
                          resource_type: ResourceType, *, super_users: frozenset[str] = frozenset(),
                          allow_if_no_acls: bool = False) -> bool:
    """Kafka's ``authorizeByResourceType``: may the principal do ``operation`` on some resource of this type?

    A DENY on the literal ``*`` refuses; ``allow.everyone.if.no.acl.found`` then permits; otherwise an ALLOW
    (literal or prefixed; the operation itself or ALL, no implied operations) permits unless a DENY dominates it:
    a literal DENY on its very name, or a prefixed DENY on a prefix of its name.
    """
    if principal in super_users:
        return True
    names: dict[tuple[Permission, PatternType], set[str]] = {}
    for pattern, entries in index.by_pattern.items():
        if pattern.resource_type != resource_type:
            continue
        for entry in entries:
            if _applies(entry, principal, host) and entry.operation in (operation, Operation.ALL):
                names.setdefault((entry.permission, pattern.pattern_type), set()).add(pattern.name)
    deny_literal = names.get((Permission.DENY, PatternType.LITERAL), set())
    deny_prefixed = names.get((Permission.DENY, PatternType.PREFIXED), set())
    allow_literal = names.get((Permission.ALLOW, PatternType.LITERAL), set())
    allow_prefixed = names.get((Permission.ALLOW, PatternType.PREFIXED), set())
    if WILDCARD in deny_literal:
        return False
    if allow_if_no_acls:
        return True

    def dominated(name: str) -> bool:
        return any(name[:i] in deny_prefixed for i in range(1, len(name) + 1))

    if any(not dominated(p) for p in allow_prefixed):
        return True
    return any(n == WILDCARD or (n not in deny_literal and not dominated(n)) for n in allow_literal)
