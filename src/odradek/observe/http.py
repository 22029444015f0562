"""The broker's HTTP server: ``/metrics`` (Prometheus), ``/`` (the console page) and its JSON.

It runs on the broker's own asyncio event loop rather than prometheus_client's threaded server: the collectors
and the console read the broker's dictionaries (partitions, groups, the controller's context), which only the
event loop mutates, so reading them on the loop needs no lock and never sees a half-applied change, while a thread
would race every update ("dictionary changed size during iteration", or an ISR counted against the wrong replica
set). The price is that a scrape holds the loop while it computes: 2-3 ms with 60 partitions, about 8 ms for a broker
hosting 3,000 replicas (bench/RESULTS.md).

HTTP is kept to what a scraper and a browser need: GET (and HEAD) of a path, one response per connection
(``Connection: close``). Anything else is answered 400, 404 or 405 and logged at debug level.
"""

from __future__ import annotations

import asyncio
import json
import logging
from importlib import resources
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry

from odradek.observe.console import ConsoleParts, cluster_view, local_view
from odradek.observe.metrics import render

__all__ = ["ObserveServer"]

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 500: "Internal Server Error"}


def _page() -> bytes:
    return resources.files("odradek.observe").joinpath("console.html").read_bytes()


class ObserveServer:
    def __init__(self, broker: ConsoleParts, registry: CollectorRegistry) -> None:
        self._broker = broker
        self._registry = registry
        self._server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self.port = -1

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("broker %d: metrics at http://%s:%d/metrics, console at http://%s:%d/",
                 self._broker.broker_id, host, self.port, host, self.port)
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._handlers):
            task.cancel()
        if self._handlers:
            await asyncio.wait(list(self._handlers), timeout=1.0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            # a paused broker (fault injection standing in for SIGSTOP) answers nothing, scrapes included
            await self._broker.faults.resumed.wait()
            status, ctype, body, head_only = await self._answer(reader)
            headers = (f"HTTP/1.1 {status} {REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
                       f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n")
            writer.write(headers.encode() + (b"" if head_only else body))
            await writer.drain()
        except (ConnectionError, asyncio.CancelledError, TimeoutError):
            pass
        finally:
            writer.close()
            if task is not None:
                self._handlers.discard(task)

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, str, bytes, bool]:
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            log.debug("bad HTTP request: %s", exc)
            return 400, "text/plain", b"bad request\n", False
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            log.debug("bad HTTP request line %r", request_line[:100])
            return 400, "text/plain", b"bad request\n", False
        method, target, _version = parts
        if method not in ("GET", "HEAD"):
            return 405, "text/plain", b"only GET\n", False
        path, _, query = target.partition("?")
        internal = "internal=1" in query.split("&")
        head_only = method == "HEAD"
        try:
            if path == "/metrics":
                return 200, CONTENT_TYPE_LATEST, render(self._registry), head_only
            if path in ("/", "/index.html"):
                return 200, "text/html; charset=utf-8", _page(), head_only
            if path == "/api/local":
                return 200, "application/json", _json(local_view(self._broker, internal)), head_only
            if path == "/api/cluster":
                return 200, "application/json", _json(await cluster_view(self._broker, internal)), head_only
        except Exception:
            log.exception("broker %d: serving %s failed", self._broker.broker_id, path)
            return 500, "text/plain", b"internal error\n", head_only
        return 404, "text/plain", b"not found\n", head_only


def _json(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
