"""Injected time, so ISR lag, session expiry, retention and retries are testable without waiting.

Every layer takes a :class:`Clock`; production uses :class:`SystemClock`, tests a :class:`ManualClock` they advance.
Timers sleep on the clock too (:meth:`Clock.sleep`), so a test drives them by advancing a :class:`ManualClock`
instead of waiting out real intervals.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (timestamps that clients see)."""
        ...

    def monotonic_ms(self) -> int:
        """Milliseconds from an arbitrary origin that never goes backwards (timeouts, lag)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once the monotonic time has moved ``seconds`` on (timers: tickers, backoffs)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """A clock that moves only when told to; both readings advance together.

    :meth:`sleep` waits for :meth:`advance`, not for real time, so a sleeper wakes exactly when a test has moved
    the clock to its deadline (whole milliseconds, rounded up, so a sleep never ends early).
    """

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now = now_ms
        self._mono = 0
        self._sleepers: list[tuple[int, asyncio.Future[None]]] = []

    def now_ms(self) -> int:
        return self._now

    def monotonic_ms(self) -> int:
        return self._mono

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("time does not go backwards")
        self._now += ms
        self._mono += ms
        if self._sleepers:
            waiting = []
            for deadline, future in self._sleepers:
                if future.done():
                    continue  # its sleeper was cancelled
                if deadline <= self._mono:
                    future.set_result(None)
                else:
                    waiting.append((deadline, future))
            self._sleepers = waiting

    async def sleep(self, seconds: float) -> None:
        deadline = self._mono + max(0, math.ceil(seconds * 1000))
        if deadline <= self._mono:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((deadline, future))
        await future

    def sleep_deadlines(self) -> list[int]:
        """Monotonic deadlines of the sleeps in progress, soonest first: lets a test wait until a timer is parked
        rather than guess how long that takes."""
        return sorted(d for d, f in self._sleepers if not f.done())
