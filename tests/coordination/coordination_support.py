"""Support for the coordination tests: a real ZooKeeper process, a watch recorder, a cuttable TCP link."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any

from odradek.coordination import WatchedEvent

# ------------------------------------------------------------------------------------------- ZooKeeper


def unique_chroot() -> str:
    return f"/odradek-test-{uuid.uuid4().hex[:12]}"


# ------------------------------------------------------------------------------------------- helpers


class Recorder:
    """A watch callback that remembers what fired, on which thread, and lets a test await it."""

    def __init__(self) -> None:
        self.events: list[WatchedEvent] = []
        self.threads: set[int] = set()
        self._changed: asyncio.Event | None = None

    def __call__(self, event: WatchedEvent) -> None:
        self.events.append(event)
        self.threads.add(threading.get_ident())
        if self._changed is not None:
            self._changed.set()

    async def wait(self, count: int = 1, timeout: float = 20.0) -> list[WatchedEvent]:
        if self._changed is None:
            self._changed = asyncio.Event()
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.events) < count:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"expected {count} events, got {self.events}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return self.events


async def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "") -> None:
    """Poll a condition on the loop with a deadline (for state that arrives from another thread)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(0.02)


# ------------------------------------------------------------------------------------------- a cuttable link


class CuttableProxy:
    """A loopback TCP proxy to ZooKeeper whose link a test can cut and restore, faking a partition."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        self._cut = threading.Event()
        self._closed = False
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._accepting = threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True)
        self._accepting.start()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept_loop(self) -> None:
        for _ in itertools.count():
            try:
                client, _addr = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set() or self._closed:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            self._drop(src)
            self._drop(dst)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def cut(self) -> None:
        """Drop every live connection and refuse new ones until :meth:`restore`."""
        self._cut.set()
        with self._lock:
            live = list(self._sockets)
        for sock in live:
            self._drop(sock)

    def restore(self) -> None:
        self._cut.clear()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()
