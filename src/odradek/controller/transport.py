"""A real TCP transport for the controller's requests, framed as :mod:`odradek.controller.requests` describes.

One connection per broker, opened on first use and dropped on any error (the channel retries, and the next send
reconnects). A connection carries one request at a time: the controller's channel already sends one at a time per
broker, and the per-connection lock only guards a second user such as a broker's controlled-shutdown request.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct

from odradek.controller.requests import (
    CONTROLLED_SHUTDOWN,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    RequestFormatError,
    decode_response,
    encode_body,
    frame_request,
    parse_response_frame,
)
from odradek.coordination.znodes import Endpoint

__all__ = ["TcpTransport", "request_controlled_shutdown"]

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 100 * 1024 * 1024


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.lock = asyncio.Lock()
        self.correlation = 0


class TcpTransport:
    def __init__(self, client_id: str = "odradek-controller", connect_timeout_s: float = 5.0,
                 gate: asyncio.Event | None = None) -> None:
        """``gate``, when given and cleared, holds every send (the sending broker is paused)."""
        self._gate = gate
        self._client_id = client_id
        self._connect_timeout_s = connect_timeout_s
        self._connections: dict[tuple[int, str, int], _Connection] = {}

    async def send(self, broker_id: int, endpoint: Endpoint, api_key: int, body: bytes) -> bytes:
        if self._gate is not None:
            await self._gate.wait()
        key = (broker_id, endpoint.host, endpoint.port)
        connection = self._connections.get(key)
        if connection is None:
            async with asyncio.timeout(self._connect_timeout_s):
                reader, writer = await asyncio.open_connection(endpoint.host or "127.0.0.1", endpoint.port)
            connection = self._connections.setdefault(key, _Connection(reader, writer))
        async with connection.lock:
            try:
                connection.correlation = (connection.correlation + 1) & 0x7FFFFFFF
                correlation = connection.correlation
                connection.writer.write(frame_request(api_key, correlation, self._client_id, body))
                await connection.writer.drain()
                (size,) = _SIZE.unpack(await connection.reader.readexactly(4))
                if size < 4 or size > MAX_RESPONSE_BYTES:
                    raise RequestFormatError(f"response size {size} out of range")
                got, response = parse_response_frame(await connection.reader.readexactly(size))
                if got != correlation:
                    raise RequestFormatError(f"correlation id {got} does not match request {correlation}")
                return response
            except BaseException:
                self._drop(key, connection)
                raise

    def _drop(self, key: tuple[int, str, int], connection: _Connection) -> None:
        if self._connections.get(key) is connection:
            del self._connections[key]
        connection.writer.close()

    async def close(self) -> None:
        for key, connection in list(self._connections.items()):
            self._drop(key, connection)
            with contextlib.suppress(Exception):
                await connection.writer.wait_closed()


async def request_controlled_shutdown(
    transport: TcpTransport, controller_id: int, controller_endpoint: Endpoint, broker_id: int, broker_epoch: int
) -> ControlledShutdownResponse:
    """What a broker sends the active controller on SIGTERM; it retries while partitions remain."""
    raw = await transport.send(
        controller_id, controller_endpoint, CONTROLLED_SHUTDOWN,
        encode_body(ControlledShutdownRequest(broker_id, broker_epoch)),
    )
    response: ControlledShutdownResponse = decode_response(CONTROLLED_SHUTDOWN, raw)
    return response
