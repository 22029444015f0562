"""The built-in authorizer: Kafka's ``authorizer.class.name`` (AclAuthorizer or StandardAuthorizer, which decide
alike), ``super.users`` and ``allow.everyone.if.no.acl.found``, over the ACLs in the coordination store.

Every broker holds every ACL in memory (an :class:`~odradek.security.acl.AclIndex`, replaced whole on each change)
and follows the other brokers' changes through Kafka's notification znodes (``broker/link/acl_watch.py``).
Decisions are cached per (principal, host, operation, resource), and the cache is dropped whenever an ACL changes,
so a produce or fetch costs one dictionary lookup per topic once the principal has been seen. Denials are logged
the first time they are computed, as Kafka's ``kafka.authorizer.logger`` logs them at INFO.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from odradek.coordination.store import Session
from odradek.errors import ErrorCode, KafkaError
from odradek.security import acl_store
from odradek.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclIndex,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    authorize,
    authorize_any_of_type,
)

log = logging.getLogger("odradek.authorizer")

AUTHORIZER_CLASSES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
})
MAX_CACHED_DECISIONS = 100_000


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    users = set()
    for part in (text or "").split(";"):
        part = part.strip()
        if not part:
            continue
        if ":" not in part:
            raise ValueError(f"super.users: expected principalType:name, got {part!r}")
        users.add(part)
    return frozenset(users)


def check_settings(values: Mapping[str, Any]) -> None:
    """ValueError for an ``authorizer.class.name`` other than Kafka's two built-in ones, or a bad ``super.users``."""
    name = (values.get("authorizer.class.name") or "").strip()
    if name and name not in AUTHORIZER_CLASSES:
        raise ValueError(f"authorizer.class.name: unknown authorizer {name!r} (odradek has the built-in one: "
                         f"{' or '.join(sorted(AUTHORIZER_CLASSES))})")
    parse_super_users(values.get("super.users"))


def from_config(values: Mapping[str, Any], sessions: Callable[[], Session] | None = None) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` asks for, or None (no authorization, Kafka's default)."""
    check_settings(values)
    if not (values.get("authorizer.class.name") or "").strip():
        return None
    return Authorizer(parse_super_users(values.get("super.users")),
                      bool(values.get("allow.everyone.if.no.acl.found")), sessions)


def validate_new(binding: AclBinding) -> str | None:
    """Why CreateAcls must refuse this ACL (INVALID_REQUEST), or None: Kafka's AclApis, AclAuthorizer and
    AclControlManager checks together."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (Operation.UNKNOWN, Operation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permissionType {entry.permission.name}"
    if not pattern.name:
        return "Invalid empty resource name"
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if "/" in pattern.name:
        return f"ACL binding contains invalid resource name: {pattern.name}"
    kind, sep, _ = entry.principal.partition(":")
    if not sep or not kind:
        return f"Invalid principal {entry.principal!r}: expected principalType:principalName"
    if not entry.host:
        return "Invalid empty host"
    return None


class Authorizer:
    def __init__(self, super_users: frozenset[str] = frozenset(), allow_if_no_acls: bool = False,
                 sessions: Callable[[], Session] | None = None) -> None:
        self.super_users = super_users
        self.allow_if_no_acls = allow_if_no_acls
        self.sessions = sessions
        self.index = AclIndex()
        self._decisions: dict[tuple[str, str, Operation, ResourceType, str], bool] = {}
        self._lock = asyncio.Lock()

    # --- decisions ---------------------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str, log_denied: bool = True) -> bool:
        """``log_denied`` False for checks that only filter what is shown (Kafka's ``logIfDenied=false``)."""
        key = (principal, host, operation, resource_type, name)
        decided = self._decisions.get(key)
        if decided is None:
            decided = authorize(self.index, principal, host, operation, resource_type, name,
                                super_users=self.super_users, allow_if_no_acls=self.allow_if_no_acls)
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions = {}
            self._decisions[key] = decided
            if not decided and log_denied:
                log.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
                         principal, operation.pascal, host, resource_type.pascal, name)
        return decided

    def authorize_any_of_type(self, principal: str, host: str, operation: Operation,
                              resource_type: ResourceType) -> bool:
        return authorize_any_of_type(self.index, principal, host, operation, resource_type,
                                     super_users=self.super_users, allow_if_no_acls=self.allow_if_no_acls)

    # --- the cache, kept by this broker's writes and the notifications it follows ------------------------------

    def replace_all(self, acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        self.index = AclIndex(acls)
        self._decisions = {}

    def set_acls(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        if self.index.by_pattern.get(pattern, frozenset()) == entries:
            return
        self.index = self.index.with_acls(pattern, entries)
        self._decisions = {}

    async def refresh(self, pattern: ResourcePattern) -> None:
        """Re-read one pattern's ACLs (a change notification named it)."""
        entries, _ = await acl_store.read_resource(self._session(), pattern)
        self.set_acls(pattern, entries)

    async def reload(self) -> None:
        self.replace_all(await acl_store.load_all(self._session()))

    def _session(self) -> Session:
        if self.sessions is None:
            raise KafkaError(ErrorCode.broker_not_available, "the authorizer has no coordination session")
        return self.sessions()

    # --- the admin APIs ----------------------------------------------------------------------------------------

    def acls(self, flt: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self.index.bindings() if flt.matches(b)]

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """One result per binding: None when stored (already present counts), else the error."""
        results: list[KafkaError | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            reason = validate_new(binding)
            if reason is not None:
                results[i] = KafkaError(ErrorCode.invalid_request, reason)
            else:
                by_pattern.setdefault(binding.pattern, []).append(i)
        async with self._lock:
            for pattern, indexes in by_pattern.items():
                new = frozenset(bindings[i].entry for i in indexes)

                def add(current: frozenset[AccessControlEntry],
                        new: frozenset[AccessControlEntry] = new) -> frozenset[AccessControlEntry]:
                    return current | new

                try:
                    _, after = await acl_store.update_resource(self._session(), pattern, add)
                except Exception as exc:  # each binding answers its own error, as in Kafka
                    log.warning("creating ACLs on %s failed: %r", pattern, exc)
                    for i in indexes:
                        results[i] = _as_kafka_error(exc)
                    continue
                self.set_acls(pattern, after)
        return results

    async def delete_acls(self, filters: Sequence[AclBindingFilter],
                          ) -> list[list[tuple[AclBinding, KafkaError | None]]]:
        """Per filter, the bindings it deleted (each with its own error, if its write failed). A binding that
        several filters match is reported under the first, as Kafka reports it."""
        deleted: dict[AclBinding, int] = {}
        errors: dict[AclBinding, KafkaError] = {}
        async with self._lock:
            patterns = set(self.index.by_pattern)
            for flt in filters:
                patterns.update(flt.exact_patterns())
            for pattern in sorted(patterns, key=lambda p: (p.resource_type, p.pattern_type, p.name)):
                matching = [(i, f) for i, f in enumerate(filters) if f.matches_pattern(pattern)]
                if not matching:
                    continue
                removed: dict[AclBinding, int] = {}

                def change(current: frozenset[AccessControlEntry], pattern: ResourcePattern = pattern,
                           matching: list[tuple[int, AclBindingFilter]] = matching,
                           removed: dict[AclBinding, int] = removed) -> frozenset[AccessControlEntry]:
                    removed.clear()
                    keep = set()
                    for entry in current:
                        hit = next((i for i, f in matching if f.matches_entry(entry)), None)
                        if hit is None:
                            keep.add(entry)
                        else:
                            removed[AclBinding(pattern, entry)] = hit
                    return frozenset(keep)

                try:
                    _, after = await acl_store.update_resource(self._session(), pattern, change)
                    self.set_acls(pattern, after)
                except Exception as exc:  # each binding answers its own error
                    log.warning("deleting ACLs on %s failed: %r", pattern, exc)
                    for binding in removed:
                        errors[binding] = _as_kafka_error(exc)
                for binding, i in removed.items():
                    deleted.setdefault(binding, i)
        out: list[list[tuple[AclBinding, KafkaError | None]]] = [[] for _ in filters]
        for binding, i in deleted.items():
            out[i].append((binding, errors.get(binding)))
        return out


def _as_kafka_error(exc: BaseException) -> KafkaError:
    if isinstance(exc, KafkaError):
        return exc
    return KafkaError(ErrorCode.unknown_server_error, str(exc) or type(exc).__name__)
