"""An asyncio Kafka client connection between brokers (follower fetches, OffsetForLeaderEpoch).

Requests are kio entities; one request is in flight per connection, as a follower fetcher needs nothing more.
Any failure closes the connection and raises; the caller (a fetcher) backs off and reconnects. It opens through
:func:`odradek.security.broker_client.open_broker_connection` (the inter-broker listener's security); framing is
:class:`odradek.protocol.client.AsyncConnection`'s.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.client import AsyncConnection
from odradek.protocol.entities import decode_entity, encode_entity, entity_schemas
from odradek.security.broker_client import PLAINTEXT, OutgoingSecurity, open_broker_connection

READ_BUFFER = 1 << 22
"""Fetch responses are megabytes: a large stream buffer reads them in few system calls."""


class PeerConnection:
    def __init__(self, host: str, port: int, client_id: str, security: OutgoingSecurity = PLAINTEXT) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.security = security
        self._conn: AsyncConnection | None = None

    async def connect(self, timeout: float = 5.0) -> None:
        self._conn = await open_broker_connection(self.host, self.port, self.client_id, self.security,
                                                  timeout=timeout, limit=READ_BUFFER)

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    async def request(self, api_key: int, version: int, body: Any, timeout: float) -> Any:
        if not self.connected:
            await self.connect()
        # a local reference: close() from another task (a fetcher being stopped) must surface as a closed
        # connection here, not as an AttributeError on a connection that was set to None mid-request
        conn = self._conn
        assert conn is not None
        schemas = entity_schemas(api_key, version)
        frame, offset = await conn.request(api_key, version, encode_entity(body),
                                           flexible_request=schemas.flexible_request,
                                           flexible_response=schemas.flexible_response, timeout=timeout)
        return decode_entity(schemas.response, frame, offset)
