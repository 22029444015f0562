"""Which event loop the brokers run on: uvloop where it is installed, asyncio's own loop when asked for.

Every request and every replication round is a few socket reads and writes, futures and callbacks on the loop, and
three brokers of ``odradek up`` share one process; uvloop (libuv, in C) does that bookkeeping for a fraction of the
CPU asyncio's pure-Python selector loop spends (bench/RESULTS.md, "Latency (issue 11)"). ``ODRADEK_EVENT_LOOP``
chooses: ``uvloop`` (the default; asyncio's loop where uvloop is not installed, e.g. on Windows, with a warning only if
uvloop was asked for by name) or ``asyncio`` (the opt-out, say to rule the loop out when chasing a bug).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

ENV = "ODRADEK_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


def choose(setting: str | None, uvloop_installed: bool) -> str:
    """The loop to run for an ``ODRADEK_EVENT_LOOP`` value (None or empty: the default, uvloop if installed)."""
    wanted = (setting or "uvloop").strip().lower()
    if wanted not in CHOICES:
        raise ValueError(f"{ENV}={setting!r}: expected one of {', '.join(CHOICES)}")
    if wanted == "uvloop" and not uvloop_installed:
        return "asyncio"
    return wanted


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory for the loop ``ODRADEK_EVENT_LOOP`` picks (read now, so a test may set it per call)."""
    setting = os.environ.get(ENV)
    try:
        import uvloop
    except ImportError:
        installed = False
    else:
        installed = True
    if choose(setting, installed) == "uvloop":
        return uvloop.new_event_loop
    if setting and setting.strip().lower() == "uvloop":
        log.warning("%s=uvloop but uvloop is not installed: running on asyncio's loop", ENV)
    return asyncio.new_event_loop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop of the configured kind (for a loop run on a thread of its own)."""
    return loop_factory()()


def run(main: Coroutine[Any, Any, T], factory: Callable[[], asyncio.AbstractEventLoop] | None = None) -> T:
    """``asyncio.run`` on the configured loop (or ``factory``'s, from :func:`loop_factory` called earlier)."""
    with asyncio.Runner(loop_factory=factory or loop_factory()) as runner:
        return runner.run(main)
