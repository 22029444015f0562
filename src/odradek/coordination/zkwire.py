"""One ZooKeeper session spoken directly on the asyncio loop, with kazoo's codecs for the jute wire format.

Why not kazoo's client: its connection thread sends one request and reads one reply per ``select`` round trip and
hands every result to a completion thread, which caps a pipelined Python client at a few thousand operations a
second (measured: about 2,800 creates/s), below what a controller with 100,000 partitions needs. Here requests are
framed by kazoo's :mod:`kazoo.protocol.serialization` classes, written to the socket in batches, and replies are
decoded in the loop's own ``data_received``, so there are no threads, no locks and no hand-offs.

What it does, as ZooKeeper's own client does:

* connect to the hosts in turn (``host:port,host:port``), with the session id, password and last zxid seen, and
  report :class:`SessionState` changes: CONNECTED, SUSPENDED while reconnecting, EXPIRED when the server says so;
* ping every third of the negotiated timeout and drop a connection silent for two thirds of it;
* after a reconnect, re-register every watch with ``SetWatches`` and the last zxid seen, so the server fires the
  events that happened while the client was away;
* fail in-flight requests with connection loss when the connection drops (their outcome is unknown).

The watch *registry* (which callbacks wait on which path) is the caller's: :class:`ZkWire` reports raw events and
asks for the registered paths when it needs to re-arm them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import struct
from collections import deque
from collections.abc import Callable
from typing import Any

from kazoo import exceptions as kz
from kazoo.protocol.serialization import (
    Close,
    Connect,
    Exists,
    ReplyHeader,
    Watch,
    int_struct,
    write_string,
)

from odradek.coordination.store import (
    ConnectionLossError,
    CoordinationError,
    SessionExpiredError,
    SessionState,
)

__all__ = ["Reply", "ZkWire", "parse_hosts"]

log = logging.getLogger(__name__)

WATCH_XID = -1
PING_XID = -2
SET_WATCHES_XID = -8
PING_OPCODE = 11
SET_WATCHES_OPCODE = 101
_PING_FRAME = struct.pack("!iii", 8, PING_XID, PING_OPCODE)
_NO_NODE = kz.NoNodeError.code

Reply = Callable[[Any, BaseException | None], None]
"""Called on the loop with (decoded response, None) or (None, exception) for one request."""


MAX_IN_FLIGHT = 256  # well under ZooKeeper's default globalOutstandingLimit (1,000 outstanding requests)
REFILL_AT = MAX_IN_FLIGHT * 3 // 4
_FRAME_HEADER = struct.Struct("!iii")

def parse_hosts(hosts: str) -> list[tuple[str, int]]:
    out = []
    for item in hosts.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    return out


class _Protocol(asyncio.Protocol):
    def __init__(self, wire: ZkWire) -> None:
        self.wire = wire
        self.buffer = bytearray()
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.handshake: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.wire._last_recv = asyncio.get_running_loop().time()
        buffer = self.buffer
        buffer += data
        start = 0
        end = len(buffer)
        while end - start >= 4:
            length = int_struct.unpack_from(buffer, start)[0]
            if end - start - 4 < length:
                break
            frame = bytes(buffer[start + 4 : start + 4 + length])
            start += 4 + length
            if not self.handshake.done():
                self.handshake.set_result(frame)
            else:
                self.wire._frame(frame)
        del buffer[:start]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        if not self.handshake.done():
            self.handshake.set_exception(ConnectionLossError(None, "connection closed during handshake"))


class ZkWire:
    """A ZooKeeper session over one (re)connecting TCP connection, driven by the running loop."""

    def __init__(
        self,
        hosts: str,
        timeout_ms: int,
        on_state: Callable[[SessionState], None],
        on_event: Callable[[int, str], None],
        watched_paths: Callable[[], tuple[list[str], list[str], list[str]]],
    ) -> None:
        self.hosts = parse_hosts(hosts)
        self.requested_timeout_ms = timeout_ms
        self.timeout_ms = timeout_ms
        self.session_id = 0
        self.passwd = b"\x00" * 16
        self.last_zxid = 0
        self.state = SessionState.SUSPENDED  # not yet connected
        self._on_state = on_state
        self._on_event = on_event
        self._watched_paths = watched_paths
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._pending: deque[tuple[int, Any, Reply]] = deque()
        self._backlog: deque[tuple[Any, Reply]] = deque()  # accepted, not yet written: beyond MAX_IN_FLIGHT
        self._xid = 0
        self._last_recv = 0.0
        self._connected = asyncio.Event()
        self._runner: asyncio.Task[None] | None = None
        self._host_index = random.randrange(len(self.hosts))
        self._closing = False
        self._may_connect = asyncio.Event()
        self._may_connect.set()

    # ------------------------------------------------------------------------------------- lifecycle

    async def start(self, deadline_s: float) -> None:
        """Open the session; raise :class:`ConnectionLossError` if no host answers within ``deadline_s``."""
        self._runner = self._loop.create_task(self._run())
        try:
            await asyncio.wait_for(self._connected.wait(), deadline_s)
        except TimeoutError:
            await self.abort()
            raise ConnectionLossError(None, f"no ZooKeeper reachable at {self.hosts}") from None

    async def _run(self) -> None:
        delay = 0.05
        while self.state not in (SessionState.EXPIRED, SessionState.CLOSED):
            await self._may_connect.wait()
            host, port = self.hosts[self._host_index % len(self.hosts)]
            self._host_index += 1
            try:
                protocol = await self._connect(host, port)
            except Exception as exc:  # refused, timed out, garbled handshake: try the next host
                if self.state is SessionState.EXPIRED:
                    return
                log.debug("ZooKeeper %s:%s unreachable: %r", host, port, exc)
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 1.0)
                continue
            delay = 0.05
            pinger = self._loop.create_task(self._ping(protocol))
            try:
                await protocol.lost
            finally:
                pinger.cancel()
            self._transport = None
            if self._closing:
                return
            self._fail_pending(ConnectionLossError(None, "connection lost"))
            if self.state is SessionState.CONNECTED:
                self._connected.clear()
                self._set_state(SessionState.SUSPENDED)

    async def _connect(self, host: str, port: int) -> _Protocol:
        connect_timeout = max(self.timeout_ms / 1000 / len(self.hosts), 1.0)
        transport, protocol = await asyncio.wait_for(
            self._loop.create_connection(lambda: _Protocol(self), host, port), connect_timeout
        )
        request = Connect(0, self.last_zxid, self.requested_timeout_ms, self.session_id, self.passwd, False)
        body = bytes(request.serialize())
        transport.write(int_struct.pack(len(body)) + body)
        try:
            frame = await asyncio.wait_for(protocol.handshake, connect_timeout)
        except BaseException:
            transport.abort()
            raise
        response, _ = Connect.deserialize(frame, 0)
        if response.time_out <= 0:
            transport.abort()
            self._expire()
            raise SessionExpiredError(None)
        reconnect = self.session_id != 0
        self.session_id = response.session_id
        self.passwd = response.passwd
        self.timeout_ms = response.time_out
        self._transport = transport
        self._last_recv = self._loop.time()
        if reconnect:
            self._send_set_watches()
        self._connected.set()
        self._set_state(SessionState.CONNECTED)
        return protocol

    async def _ping(self, protocol: _Protocol) -> None:
        interval = self.timeout_ms / 1000 / 3
        read_timeout = self.timeout_ms / 1000 * 2 / 3
        while not protocol.lost.done():
            await asyncio.sleep(interval)
            if self._loop.time() - self._last_recv > read_timeout:
                log.info("ZooKeeper session 0x%x: no reply for %.1fs, reconnecting", self.session_id, read_timeout)
                if self._transport is not None:
                    self._transport.abort()
                return
            if self._transport is not None:
                self._transport.write(_PING_FRAME)

    def _send_set_watches(self) -> None:
        data, exist, child = self._watched_paths()
        if not (data or exist or child) or self._transport is None:
            return
        body = bytearray(struct.pack("!iiq", SET_WATCHES_XID, SET_WATCHES_OPCODE, self.last_zxid))
        for paths in (data, exist, child):
            body += int_struct.pack(len(paths))
            for path in paths:
                body += write_string(path)
        self._pending.append((SET_WATCHES_XID, None, _ignore))
        self._transport.write(int_struct.pack(len(body)) + bytes(body))

    def _set_state(self, state: SessionState) -> None:
        if state is not self.state:
            self.state = state
            self._on_state(state)

    def _expire(self) -> None:
        self._fail_pending(SessionExpiredError(None))
        self._set_state(SessionState.EXPIRED)

    def _fail_pending(self, error: CoordinationError) -> None:
        pending, self._pending = self._pending, deque()
        backlog, self._backlog = self._backlog, deque()
        for xid, _request, reply in pending:
            if xid != SET_WATCHES_XID:
                reply(None, error)
        for _request, reply in backlog:
            reply(None, error)

    def hold_reconnect(self, hold: bool) -> None:
        """Keep this client from reconnecting (a fault hook: lets another connection close the session)."""
        if hold:
            self._may_connect.clear()
        else:
            self._may_connect.set()

    async def close(self) -> None:
        """Close the session on the server (its ephemerals go now, not after the timeout)."""
        self._closing = True
        if self.state is SessionState.CONNECTED and self._transport is not None:
            done: asyncio.Future[None] = self._loop.create_future()

            def closed(_response: Any, _error: BaseException | None) -> None:
                if not done.done():
                    done.set_result(None)

            self.send(Close(), closed)
            with contextlib.suppress(TimeoutError, CoordinationError):
                await asyncio.wait_for(done, 2.0)
        self._set_state(SessionState.CLOSED)
        await self.abort()

    async def abort(self) -> None:
        self._closing = True
        if self.state is not SessionState.EXPIRED:
            self.state = SessionState.CLOSED
        if self._transport is not None:
            self._transport.abort()
            self._transport = None
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        self._fail_pending(SessionExpiredError(None, "session closed"))

    # ------------------------------------------------------------------------------------- requests

    def send(self, request: Any, reply: Reply) -> None:
        """Queue one request; ``reply`` is called on the loop with its outcome."""
        self.send_many(((request, reply),))

    def send_many(self, requests: Any) -> None:
        """Queue every request; at most MAX_IN_FLIGHT are on the wire, each reply comes back in order.

        The bound is for the server's sake: ZooKeeper serves every client's requests, pings included, through one
        pipeline, and a controller writing tens of thousands of znodes should not queue them all there at once
        (Kafka's client keeps ``zookeeper.max.in.flight.requests``, 10 by default). Our own pings bypass the queue.
        """
        transport = self._transport
        if transport is None or self.state is not SessionState.CONNECTED:
            error = (
                ConnectionLossError(None, "not connected")
                if self.state is SessionState.SUSPENDED
                else SessionExpiredError(None, f"session {self.state.value}")
            )
            for _request, reply in requests:
                reply(None, error)
            return
        self._backlog.extend(requests)
        self._pump()

    def _pump(self) -> None:
        """Write queued requests while fewer than MAX_IN_FLIGHT await their replies."""
        transport = self._transport
        room = MAX_IN_FLIGHT - len(self._pending)
        if transport is None or room <= 0 or not self._backlog:
            return
        chunks = []
        pending = self._pending
        backlog = self._backlog
        pack = _FRAME_HEADER.pack
        while room > 0 and backlog:
            request, reply = backlog.popleft()
            self._xid = xid = (self._xid + 1) & 0x7FFFFFFF or 1
            body = request.serialize()
            chunks.append(pack(len(body) + 8, xid, request.type))
            chunks.append(body)
            pending.append((xid, request, reply))
            room -= 1
        transport.write(b"".join(chunks))

    def _frame(self, frame: bytes) -> None:
        header, offset = ReplyHeader.deserialize(frame, 0)
        xid = header.xid
        if xid == WATCH_XID:
            event, _ = Watch.deserialize(frame, offset)
            self._on_event(event.type, event.path)
            return
        if xid == PING_XID:  # pings are not queued: ZooKeeper's own client does not match them either
            return
        if not self._pending:
            log.warning("ZooKeeper reply xid %s with nothing pending", xid)
            return
        expected, request, reply = self._pending.popleft()
        if self._backlog and len(self._pending) <= REFILL_AT:
            self._pump()  # refill in batches: one write per quarter window, not one per reply
        if xid != expected:
            log.error("ZooKeeper reply out of order (xid %s, expected %s); reconnecting", xid, expected)
            reply(None, ConnectionLossError(getattr(request, "path", None), "reply out of order"))
            if self._transport is not None:
                self._transport.abort()
            return
        if xid == SET_WATCHES_XID:
            return
        if header.zxid > 0:
            self.last_zxid = header.zxid
        err = header.err
        if err:
            if err == _NO_NODE and request.type == Exists.type:
                reply(None, None)
            elif err == kz.SessionExpiredError.code:
                reply(None, SessionExpiredError(None))
                self._expire()
            else:
                reply(None, kz.EXCEPTIONS[err]())
            return
        try:
            response = request.deserialize(frame, offset) if hasattr(request, "deserialize") else None
        except Exception as exc:  # a reply we cannot decode is a broken connection, not a crash
            log.exception("undecodable ZooKeeper reply to %r", request)
            reply(None, ConnectionLossError(getattr(request, "path", None), f"bad reply: {exc}"))
            return
        reply(response, None)


def _ignore(_response: Any, _error: BaseException | None) -> None:
    return None
