"""Kafka client connections, blocking and asyncio, over the one framing of :mod:`odradek.protocol.wire`.

Both write the request header and size prefix, read the response frame, check its correlation id and skip its
header, and hand back the frame with the offset where the body starts: what the body is (a kio entity, a
controller message, a Fetch read in bulk) is the caller's business. Every user of the protocol in odradek goes
through here: the CLI's :class:`odradek.client.KafkaConnection`, the brokers' follower fetches
(:mod:`odradek.broker.peer`), the controller's requests (:mod:`odradek.controller.transport`) and the Spark
source's Fetch client (:mod:`odradek.spark.fetch`), which imports nothing else from odradek outside ``spark``.

Any failure mid-exchange closes the connection: a half-read or mismatched response leaves the byte stream out of
step, and the next request would read someone else's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl

from odradek.protocol.wire import SIZE, Buffer, WireFormatError, read_response_header, request_header

__all__ = ["MAX_RESPONSE_BYTES", "AsyncConnection", "BlockingConnection", "ResponseError"]

MAX_RESPONSE_BYTES = 100 * 1024 * 1024
"""Not a Kafka limit: a size beyond it means a broken stream, and reading it would only exhaust memory."""


class ResponseError(ConnectionError):
    """A response that cannot answer the request sent (wrong correlation id, impossible size, bad header); a
    ``ConnectionError`` because the connection is unusable after it and is closed."""


def _next_correlation(current: int) -> int:
    return current % 0x7FFFFFFF + 1  # 1 .. 2**31 - 1, wrapping: the field is an int32


def _check_size(size: int, limit: int) -> None:
    if size < 4 or size > limit:
        raise ResponseError(f"response size {size} out of range (4-{limit})")


def _body_offset(frame: Buffer, correlation_id: int, flexible: bool) -> int:
    try:
        got, offset = read_response_header(frame, flexible)
    except WireFormatError as exc:
        raise ResponseError(f"malformed response header: {exc}") from None
    if got != correlation_id:
        raise ResponseError(f"correlation id {got} does not match request {correlation_id}")
    return offset


LARGE_BODY = 64 * 1024


def _frame(api_key: int, api_version: int, correlation_id: int, client_id: str | None, flexible: bool,
           body: Buffer) -> list[Buffer]:
    header = request_header(api_key, api_version, correlation_id, client_id, flexible)
    return [SIZE.pack(len(header) + len(body)), header, body]


class BlockingConnection:
    """One socket; ``send`` and ``receive`` may be split to keep requests in flight (answers come in order)."""

    def __init__(self, host: str, port: int, client_id: str | None, *, timeout: float,
                 max_response_bytes: int = MAX_RESPONSE_BYTES, ssl_context: ssl.SSLContext | None = None) -> None:
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            try:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        self._sock = sock
        self.client_id = client_id
        self._max_response_bytes = max_response_bytes
        self._correlation = 0

    def close(self) -> None:
        self._sock.close()

    def request(self, api_key: int, api_version: int, body: Buffer, *, flexible_request: bool,
                flexible_response: bool) -> tuple[memoryview, int]:
        """Send one request and wait for its answer: the response frame and where its body starts."""
        correlation_id = self.send(api_key, api_version, body, flexible=flexible_request)
        return self.receive(correlation_id, flexible=flexible_response)

    def send(self, api_key: int, api_version: int, body: Buffer, *, flexible: bool) -> int:
        """Write a request (header v2 when ``flexible``, else v1); returns its correlation id for ``receive``."""
        self._correlation = _next_correlation(self._correlation)
        try:
            self._sock.sendall(b"".join(_frame(api_key, api_version, self._correlation, self.client_id, flexible,
                                               body)))
        except BaseException:
            self.close()
            raise
        return self._correlation

    def receive(self, correlation_id: int, *, flexible: bool) -> tuple[memoryview, int]:
        """The next response frame, which must answer ``correlation_id``, and where its body starts."""
        try:
            (size,) = SIZE.unpack(self._recv_exact(4))
            _check_size(size, self._max_response_bytes)
            frame = self._recv_exact(size)
            return frame, _body_offset(frame, correlation_id, flexible)
        except BaseException:
            self.close()
            raise

    def _recv_exact(self, n: int) -> memoryview:
        view = memoryview(bytearray(n))
        got = 0
        while got < n:
            chunk = self._sock.recv_into(view[got:], n - got)
            if chunk == 0:
                raise ConnectionError("broker closed the connection")
            got += chunk
        return view.toreadonly()  # kio's readers refuse writable buffers; nothing downstream writes


class AsyncConnection:
    """One asyncio stream with one request in flight at a time (a lock orders concurrent users)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str | None, *,
                 max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self._reader = reader
        self._writer = writer
        self.client_id = client_id
        self._max_response_bytes = max_response_bytes
        self._lock = asyncio.Lock()
        self._correlation = 0

    @classmethod
    async def open(cls, host: str, port: int, client_id: str | None, *, timeout: float,
                   limit: int = 1 << 16, max_response_bytes: int = MAX_RESPONSE_BYTES) -> AsyncConnection:
        """Connect within ``timeout`` seconds; ``limit`` is the stream reader's buffer size."""
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port, limit=limit)
        return cls(reader, writer, client_id, max_response_bytes=max_response_bytes)

    @property
    def closed(self) -> bool:
        return self._writer.is_closing()

    def close(self) -> None:
        self._writer.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    async def request(self, api_key: int, api_version: int, body: Buffer, *, flexible_request: bool,
                      flexible_response: bool, timeout: float | None = None) -> tuple[bytes, int]:
        """Send one request and read its answer: the response frame and where its body starts. ``timeout``
        bounds the wait for the answer once the request is written."""
        async with self._lock:
            if self.closed:
                raise ConnectionError("connection closed")
            self._correlation = _next_correlation(self._correlation)
            correlation_id = self._correlation
            try:
                size, header, payload = _frame(api_key, api_version, correlation_id, self.client_id,
                                               flexible_request, body)
                # one write, one send: each write on an idle socket is a send of its own, and a peer that reads the
                # 4-byte size alone wakes once more for the rest; only a large body is written apart, uncopied
                if len(payload) < LARGE_BODY:
                    self._writer.write(b"".join((size, header, payload)))
                else:
                    self._writer.write(b"".join((size, header)))
                    self._writer.write(payload)
                await self._writer.drain()
                async with asyncio.timeout(timeout):
                    (size,) = SIZE.unpack(await self._reader.readexactly(4))
                    _check_size(size, self._max_response_bytes)
                    frame = await self._reader.readexactly(size)
                return frame, _body_offset(frame, correlation_id, flexible_response)
            except BaseException:
                self.close()
                raise
