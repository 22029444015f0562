"""Config changes, announced by AdminZkClient's sequential znodes under ``/config/changes``.

A topic's change (``topics/<t>``) re-reads its overrides for the replica manager; any other entity path
(``clients/...``, ``users/...``) goes to each of :attr:`ConfigWatch.entity_listeners` (client quotas), which
re-reads what it owns.

The watch is armed again each time it fires and after every registration (a new session has no watches), and a
change is applied once: the sequence number of the newest notification handled is remembered.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from odradek.broker.link.membership import Membership
from odradek.coordination import EventType, NoNodeError, WatchedEvent
from odradek.coordination import znodes as zn
from odradek.tasks import spawn

log = logging.getLogger(__name__)


class ConfigWatch:
    def __init__(self, membership: Membership, apply: Callable[[str, dict[str, str]], None]) -> None:
        self.membership = membership
        self.apply = apply
        self.entity_listeners: list[Callable[[str], Awaitable[None]]] = []
        self._last_seen = -1
        self.stopped = False
        membership.on_registered(self.watch)

    async def watch(self) -> None:
        session = self.membership.current()

        def fired(event: WatchedEvent) -> None:
            # A session event (expiry) is not a change: the watch is armed again once registered anew.
            if event.type is not EventType.SESSION and session is self.membership.session and not self.stopped:
                spawn(self.watch(), "config-change-watch")

        names = await session.children(zn.CONFIG_CHANGES, watch=fired)
        for name in sorted(names):
            seq = int(name.rsplit("_", 1)[1])
            if seq <= self._last_seen:
                continue
            self._last_seen = seq
            path = f"{zn.CONFIG_CHANGES}/{name}"
            try:
                data, _ = await session.get(path)
            except NoNodeError:
                continue
            note = zn.decode_or_skip(zn.ConfigChangeNotification.from_json, data, path)
            if note is None:
                continue
            if not note.entity_path.startswith("topics/"):
                for listener in self.entity_listeners:
                    await listener(note.entity_path)
                continue
            topic = note.entity_path.split("/", 1)[1]
            configs = await zn.read_topic_configs(session, [topic])
            self.apply(topic, configs.get(topic, {}))
