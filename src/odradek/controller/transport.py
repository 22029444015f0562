"""A real TCP transport for the controller's requests, in Kafka's format (:mod:`odradek.protocol.controller_requests`).

One connection per broker, opened on first use and dropped on any error (the channel retries, and the next send
reconnects). A connection carries one request at a time: the controller's channel already sends one at a time per
broker, and the connection's lock only orders a second user such as a broker's controlled-shutdown request.
Framing is :class:`odradek.protocol.client.AsyncConnection`'s.
"""

from __future__ import annotations

import asyncio

from odradek.coordination.znodes import Endpoint
from odradek.protocol.client import AsyncConnection
from odradek.protocol.controller_requests import (
    CONTROLLED_SHUTDOWN,
    VERSIONS,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    decode_response,
    encode_body,
)
from odradek.security.broker_client import PLAINTEXT, OutgoingSecurity, open_broker_connection

__all__ = ["TcpTransport", "request_controlled_shutdown"]


class TcpTransport:
    def __init__(self, client_id: str = "odradek-controller", connect_timeout_s: float = 5.0,
                 gate: asyncio.Event | None = None, security: OutgoingSecurity = PLAINTEXT) -> None:
        """``gate``, when given and cleared, holds every send (the sending broker is paused); ``security``: the
        inter-broker listener's, which every connection to a broker authenticates with."""
        self._gate = gate
        self._security = security
        self._client_id = client_id
        self._connect_timeout_s = connect_timeout_s
        self._connections: dict[tuple[int, str, int], AsyncConnection] = {}

    async def send(self, broker_id: int, endpoint: Endpoint, api_key: int, body: bytes) -> bytes:
        """Send one request body at its served version (every one is flexible) and return the response body."""
        if self._gate is not None:
            await self._gate.wait()
        key = (broker_id, endpoint.host, endpoint.port)
        connection = self._connections.get(key)
        if connection is None:
            opened = await open_broker_connection(endpoint.host or "127.0.0.1", endpoint.port, self._client_id,
                                                  self._security, timeout=self._connect_timeout_s)
            connection = self._connections.setdefault(key, opened)
            if connection is not opened:  # another send connected first
                opened.close()
        try:
            frame, offset = await connection.request(api_key, VERSIONS[api_key], body, flexible_request=True,
                                                     flexible_response=True)
        except BaseException:
            self._drop(key, connection)
            raise
        return frame[offset:]

    def _drop(self, key: tuple[int, str, int], connection: AsyncConnection) -> None:
        if self._connections.get(key) is connection:
            del self._connections[key]
        connection.close()

    async def close(self) -> None:
        for key, connection in list(self._connections.items()):
            self._drop(key, connection)
            await connection.wait_closed()


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
