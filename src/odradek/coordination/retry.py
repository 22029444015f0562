"""Requests that outlast a connection loss: Kafka's ``KafkaZkClient.retryRequestsUntilConnected``.

A :class:`RetryingSession` wraps a :class:`~odradek.coordination.store.Session`. A request that fails with
:class:`~odradek.coordination.store.ConnectionLossError` (a bulk call's items that did) waits until the session is
connected again and is sent again; when the session expires or closes instead, the wait raises
:class:`~odradek.coordination.store.SessionExpiredError`. So its caller sees every request either done or refused
by the store, never "cut off, try again later", and a sequence of requests is never left half-sent because of a
cut that the session survived.

A request whose reply was lost may already have been applied when it is sent again. The caller meets that as the
store's ordinary answers, as Kafka's controller does: a create finds its znode (NodeExists), a compare-and-set its
version moved on (BadVersion), a delete its znode gone (NoNode). The controller's writes are written to take
those answers (``controller/zkstore.py``, ``controller/applier.py``).

Waiting is on the session's own state changes, as ``ZooKeeperClient.waitUntilConnected`` waits on its condition:
no timer, no backoff, and one log line per cut rather than one per request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from odradek.coordination.store import (
    ANY_VERSION,
    ConnectionLossError,
    CoordinationError,
    Create,
    Delete,
    ForwardingSession,
    Op,
    OpResult,
    Session,
    SessionExpiredError,
    SessionState,
    SetData,
    Stat,
    WatchCallback,
)

__all__ = ["RetryingSession"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Item = TypeVar("Item")
Result = TypeVar("Result")


class RetryingSession(ForwardingSession):
    """``session`` with every request retried across connection losses; see the module docstring."""

    def __init__(self, session: Session, name: str = "") -> None:
        super().__init__(session)
        self._name = name or f"session 0x{session.session_id:x}"
        self._reconnected: asyncio.Future[SessionState] | None = None

    # ------------------------------------------------------------------------------------- waiting

    async def wait_until_connected(self) -> None:
        """Return once the session is connected; raise :class:`SessionExpiredError` if it expires or closes
        first. Concurrent callers share one wait (and one log line)."""
        while True:
            state = self.inner.state
            if state is SessionState.CONNECTED:
                return
            if state is not SessionState.SUSPENDED:
                raise SessionExpiredError(None, f"{self._name} {state.value} while waiting to reconnect")
            if self._reconnected is None or self._reconnected.done():
                log.info("%s: connection lost; waiting until connected", self._name)
                self._reconnected = asyncio.get_running_loop().create_future()
                self.inner.add_listener(self._on_state)
            await asyncio.shield(self._reconnected)

    def _on_state(self, state: SessionState) -> None:
        if state is SessionState.SUSPENDED:
            return
        self.inner.remove_listener(self._on_state)
        waiting = self._reconnected
        if waiting is not None and not waiting.done():
            waiting.set_result(state)

    async def _retry(self, call: Callable[[], Awaitable[T]]) -> T:
        while True:
            try:
                return await call()
            except ConnectionLossError:
                await self.wait_until_connected()

    async def _retry_each(self, items: Sequence[Item],
                          send: Callable[[Sequence[Item]], Awaitable[list[Result]]]) -> list[Result]:
        """A pipelined call whose items that met a connection loss are sent again (only those, in order)."""
        results: list[Result] = list(await self._retry(lambda: send(items)))
        while True:
            lost = [i for i, r in enumerate(results) if isinstance(r, ConnectionLossError)]
            if not lost:
                return results
            await self.wait_until_connected()
            resend = [items[i] for i in lost]
            again = await self._retry(lambda resend=resend: send(resend))  # type: ignore[misc]
            for index, result in zip(lost, again, strict=True):
                results[index] = result

    # ------------------------------------------------------------------------------------ the session

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False,
                     make_parents: bool = False) -> str:
        return await self._retry(lambda: self.inner.create(path, data, ephemeral=ephemeral, sequential=sequential,
                                                           make_parents=make_parents))

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        return await self._retry(lambda: self.inner.get(path, watch))

    async def set(self, path: str, data: bytes, expected_version: int = ANY_VERSION) -> Stat:
        return await self._retry(lambda: self.inner.set(path, data, expected_version))

    async def delete(self, path: str, expected_version: int = ANY_VERSION) -> None:
        await self._retry(lambda: self.inner.delete(path, expected_version))

    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        return await self._retry(lambda: self.inner.children(path, watch))

    async def children_with_stat(self, path: str, watch: WatchCallback | None = None) -> tuple[list[str], Stat]:
        return await self._retry(lambda: self.inner.children_with_stat(path, watch))

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        return await self._retry(lambda: self.inner.exists(path, watch))

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        return await self._retry(lambda: self.inner.multi(ops))

    async def create_many(self, items: Sequence[Create]) -> list[str | CoordinationError]:
        return await self._retry_each(items, self.inner.create_many)

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | CoordinationError]:
        return await self._retry_each(paths, self.inner.get_many)

    async def set_many(self, items: Sequence[SetData]) -> list[Stat | CoordinationError]:
        return await self._retry_each(items, self.inner.set_many)

    async def delete_many(self, items: Sequence[Delete]) -> list[CoordinationError | None]:
        return await self._retry_each(items, self.inner.delete_many)

    async def ensure_path(self, path: str) -> None:
        await self._retry(lambda: self.inner.ensure_path(path))
