"""Repeated log lines held back: what a process cut from ZooKeeper needs.

A broker cut from ZooKeeper retries the same operation until the session comes back or expires (seconds in the
lab, 18 s by Kafka's default). Kafka does not log per retry (``ZooKeeperClient.waitUntilConnected`` logs "Waiting
until connected" once), so :class:`LogLimiter` writes the first line of a condition and then at most one per
interval with the count of the lines it held back. It is pure over an injected clock.
"""

from __future__ import annotations

from collections.abc import Hashable

from odradek.clock import Clock

__all__ = ["LogLimiter"]


class LogLimiter:
    """Per condition (any hashable key): the first occurrence is logged, later ones at most once per
    ``interval_ms``; :meth:`check` says whether to log and how many occurrences were held back since the last."""

    def __init__(self, clock: Clock, interval_ms: int = 30_000) -> None:
        self.clock = clock
        self.interval_ms = interval_ms
        self._last: dict[Hashable, tuple[int, int]] = {}  # key -> (when last logged, held back since)

    def check(self, key: Hashable) -> int | None:
        """None: hold this line back. Otherwise log it, with the returned count of lines held back before it."""
        now = self.clock.monotonic_ms()
        last = self._last.get(key)
        if last is None or now - last[0] >= self.interval_ms:
            self._last[key] = (now, 0)
            return 0 if last is None else last[1]
        self._last[key] = (last[0], last[1] + 1)
        return None

    def clear(self, key: Hashable) -> None:
        """The condition is over: its next occurrence is logged at once."""
        self._last.pop(key, None)
