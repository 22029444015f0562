"""The coordinator's deadlines: one heap of (deadline, action), fired in order by whoever drives time.

The coordinator never sleeps. The broker's periodic tick, or a test that moved a ManualClock, calls
:meth:`Timers.fire_due`; actions check for themselves whether what they were armed for still holds (a member
that heartbeat since, a rebalance that already completed), so nothing is ever cancelled.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class Timers:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, deadline_ms: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (deadline_ms, next(self._seq), action))

    def fire_due(self, now_ms: int) -> None:
        """Run every action whose deadline is ``now_ms`` or earlier, including ones that those actions arm."""
        while self._heap and self._heap[0][0] <= now_ms:
            _, _, action = heapq.heappop(self._heap)
            try:
                action()
            except Exception:
                log.exception("group coordinator timer failed")

    def next_deadline_ms(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def clear(self) -> None:
        self._heap.clear()
