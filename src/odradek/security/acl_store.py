"""Reading and writing ACLs in the coordination store (ZooKeeper or the embedded one), in Kafka's layout.

Writes are compare-and-set on the resource znode's version, retried on a lost race, as AclAuthorizer's
``updateResourceAcls`` does, so two brokers adding ACLs to one resource at once both keep theirs; a resource left
without ACLs loses its znode. Every change is announced with a sequential notification for the other brokers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from odradek.coordination.store import BadVersionError, NodeExistsError, NoNodeError, Session
from odradek.security import acl_znodes as az
from odradek.security.acl import AccessControlEntry, ResourcePattern, ResourceType

log = logging.getLogger(__name__)

MAX_UPDATE_RETRIES = 10


async def ensure_layout(session: Session) -> None:
    for path in az.layout_paths():
        await session.ensure_path(path)


async def read_resource(session: Session, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
    """The pattern's ACLs and its znode's version (-1 when there is no znode)."""
    path = az.resource_path(pattern)
    try:
        data, stat = await session.get(path)
    except NoNodeError:
        return frozenset(), -1
    try:
        return az.decode_acls(data), stat.version
    except az.AclZnodeError as exc:
        log.warning("ignoring the ACLs in %s: %s", path, exc)
        return frozenset(), stat.version


async def load_all(session: Session) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    """Every stored ACL (Kafka's ``loadAllAcls``); unknown resource types and bad znodes are skipped with a log
    line, as Kafka skips them."""
    out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for pattern_type in az.STORED_PATTERNS:
        root = az.pattern_root(pattern_type)
        try:
            kinds = await session.children(root)
        except NoNodeError:
            continue
        for kind in kinds:
            try:
                resource_type = ResourceType(ResourceType.parse(kind))
            except ValueError:
                log.warning("ignoring unknown ACL resource type %s/%s", root, kind)
                continue
            names = await session.children(f"{root}/{kind}")
            patterns = [ResourcePattern(resource_type, name, pattern_type) for name in names]
            results = await session.get_many([az.resource_path(p) for p in patterns])
            for pattern, result in zip(patterns, results, strict=True):
                if not isinstance(result, tuple):
                    continue
                try:
                    entries = az.decode_acls(result[0])
                except az.AclZnodeError as exc:
                    log.warning("ignoring the ACLs in %s: %s", az.resource_path(pattern), exc)
                    continue
                if entries:
                    out[pattern] = entries
    return out


async def update_resource(
    session: Session, pattern: ResourcePattern,
    change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
) -> tuple[frozenset[AccessControlEntry], frozenset[AccessControlEntry]]:
    """Apply ``change`` to the pattern's stored ACLs with compare-and-set; returns (before, after). A change that
    changes nothing writes nothing and announces nothing."""
    path = az.resource_path(pattern)
    for _ in range(MAX_UPDATE_RETRIES + 1):
        current, version = await read_resource(session, pattern)
        wanted = change(current)
        if wanted == current:
            return current, current
        try:
            if not wanted:
                await session.delete(path, version)
            elif version < 0:
                await session.create(path, az.encode_acls(wanted), make_parents=True)
            else:
                await session.set(path, az.encode_acls(wanted), version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            await asyncio.sleep(0.01)  # another broker changed the resource meanwhile: read it again
            continue
        await notify(session, pattern)
        return current, wanted
    raise RuntimeError(f"failed to update the ACLs of {path} after {MAX_UPDATE_RETRIES} retries")


async def notify(session: Session, pattern: ResourcePattern) -> None:
    base = az.changes_path(pattern.pattern_type)
    await session.create(f"{base}/{az.CHANGE_PREFIX}", az.encode_change(pattern), sequential=True,
                         make_parents=True)


def change_sequence(name: str) -> int | None:
    if not name.startswith(az.CHANGE_PREFIX):
        return None
    try:
        return int(name[len(az.CHANGE_PREFIX):])
    except ValueError:
        return None

