"""ACL changes, announced by Kafka's sequential znodes under ``/kafka-acl-changes`` (literal patterns) and
``/kafka-acl-extended-changes`` (prefixed), as ``ZkNodeChangeNotificationListener`` follows them.

At each registration (the first, and after a session expiry, when notifications may have been missed) the watches
are armed first and every ACL is loaded after, so no change falls between the two; a notification is then applied
once, by re-reading the pattern it names. A broker therefore enforces an ACL created through another broker as soon
as the notification's watch fires (milliseconds in one process, a ZooKeeper round trip across hosts). As Kafka's
listener does, notifications older than 15 minutes are deleted once seen, so the change paths stay short.
"""

from __future__ import annotations

import contextlib
import logging

from odradek.broker.link.membership import Membership
from odradek.coordination import EventType, NoNodeError, WatchedEvent
from odradek.coordination.store import Session
from odradek.security import acl_store
from odradek.security import acl_znodes as az
from odradek.security.acl import PatternType
from odradek.security.authorizer import Authorizer
from odradek.tasks import spawn

log = logging.getLogger(__name__)

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener.changeExpirationMs


class AclWatch:
    def __init__(self, membership: Membership, authorizer: Authorizer) -> None:
        self.membership = membership
        self.authorizer = authorizer
        self._last_seen: dict[PatternType, int] = {}
        self.stopped = False
        membership.on_registered(self.start)

    async def start(self) -> None:
        session = self.membership.current()
        await acl_store.ensure_layout(session)
        for pattern_type in az.STORED_PATTERNS:
            self._last_seen[pattern_type] = -1
            await self._follow(pattern_type, skip_existing=True)
        await self.authorizer.reload()

    async def _follow(self, pattern_type: PatternType, skip_existing: bool = False) -> None:
        session = self.membership.current()

        def fired(event: WatchedEvent) -> None:
            if event.type is not EventType.SESSION and session is self.membership.session and not self.stopped:
                spawn(self._follow(pattern_type), f"acl-change-watch-{pattern_type.name.lower()}")

        base = az.changes_path(pattern_type)
        names = await session.children(base, watch=fired)
        numbered = sorted((seq, name) for name in names if (seq := acl_store.change_sequence(name)) is not None)
        if skip_existing:
            # the full load that follows covers them
            self._last_seen[pattern_type] = max((seq for seq, _ in numbered), default=-1)
        else:
            for seq, name in numbered:
                if seq <= self._last_seen[pattern_type]:
                    continue
                self._last_seen[pattern_type] = seq
                await self._apply(session, pattern_type, f"{base}/{name}")
        await self._purge(session, [f"{base}/{name}" for _, name in numbered])

    async def _purge(self, session: Session, paths: list[str]) -> None:
        """Delete the notifications older than Kafka's 15 minutes (every broker may; the first one wins)."""
        oldest = self.membership.clock.now_ms() - CHANGE_EXPIRATION_MS
        results = await session.get_many(paths)
        for path, result in zip(paths, results, strict=True):
            if isinstance(result, tuple) and result[1].ctime < oldest:
                with contextlib.suppress(NoNodeError):
                    await session.delete(path)

    async def _apply(self, session: Session, pattern_type: PatternType, path: str) -> None:
        try:
            data, _ = await session.get(path)
        except NoNodeError:
            return
        try:
            pattern = az.decode_change(pattern_type, data)
        except az.AclZnodeError as exc:
            log.warning("skipping ACL change notification %s: %s", path, exc)
            return
        await self.authorizer.refresh(pattern)
