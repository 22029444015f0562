"""How much of its time an asyncio event loop spends running callbacks rather than waiting for I/O.

Everything a broker does runs on one event loop, so the loop's busy fraction is its saturation: at 100 % requests
queue behind one another. asyncio has no counter for it, so the loop's selector is wrapped: time spent inside
``select()`` is idle, the rest is busy. The wrap costs two ``perf_counter`` calls per loop iteration. It relies on
``BaseSelectorEventLoop._selector`` (CPython's default loop on Linux); where that is absent, nothing is measured.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

__all__ = ["LoopMeter", "meter"]


class LoopMeter:
    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.idle = 0.0

    @property
    def busy_seconds(self) -> float:
        return max(0.0, time.perf_counter() - self.started - self.idle)


_meters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopMeter] = weakref.WeakKeyDictionary()


def meter(loop: asyncio.AbstractEventLoop) -> LoopMeter | None:
    """The loop's meter, installed on first use (brokers sharing a loop share it)."""
    existing = _meters.get(loop)
    if existing is not None:
        return existing
    selector = getattr(loop, "_selector", None)
    if selector is None or not hasattr(selector, "select"):
        return None
    m = LoopMeter()
    original = selector.select

    def select(timeout: float | None = None) -> Any:
        began = time.perf_counter()
        try:
            return original(timeout)
        finally:
            m.idle += time.perf_counter() - began

    selector.select = select
    _meters[loop] = m
    return m
