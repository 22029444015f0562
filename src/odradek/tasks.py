"""Fire-and-forget tasks that are neither garbage-collected mid-flight nor silent when they fail.

asyncio keeps only weak references to tasks, so a task nobody holds can vanish before it finishes; and an
exception in a task nobody awaits surfaces only as "Task exception was never retrieved" at exit. ``spawn`` keeps
each task until it ends and logs its failure with its name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)
_running: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(coro)
    task.set_name(name)
    _running.add(task)
    task.add_done_callback(_finished)
    return task


def _finished(task: asyncio.Task[Any]) -> None:
    _running.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.error("background task %s failed", task.get_name(), exc_info=task.exception())
