"""Connections from this broker to its peers for the coordinator's requests (WriteTxnMarkers, and the verification
AddPartitionsToTxn a partition leader sends a transaction coordinator).

One connection per peer, opened on first use and dropped on any failure (the caller retries and the next request
connects again, to wherever the metadata says the peer is now). Requests are kio entities over
:class:`odradek.protocol.client.AsyncConnection`, whose lock keeps one request in flight per connection. A paused
broker (fault injection) sends nothing until resumed; an isolated one cannot connect.
"""

from __future__ import annotations

import asyncio
from typing import Any

from odradek.broker.faults import FaultState
from odradek.broker.metadata import MetadataCache
from odradek.protocol.client import AsyncConnection
from odradek.protocol.entities import decode_entity, encode_entity, entity_schemas
from odradek.security.broker_client import PLAINTEXT, OutgoingSecurity, open_broker_connection

CONNECT_TIMEOUT_S = 5.0


class PeerPool:
    def __init__(self, metadata: MetadataCache, client_id: str, faults: FaultState | None = None,
                 security: OutgoingSecurity = PLAINTEXT) -> None:
        self.metadata = metadata
        self.security = security
        self.client_id = client_id
        self.faults = faults
        self._connections: dict[tuple[int, str, int], AsyncConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def _connection(self, broker: int) -> tuple[tuple[int, str, int], AsyncConnection]:
        endpoint = self.metadata.endpoint(broker)
        if endpoint is None:
            raise ConnectionError(f"broker {broker} is not alive")
        key = (broker, endpoint[0], endpoint[1])
        lock = self._locks.setdefault(broker, asyncio.Lock())
        async with lock:
            conn = self._connections.get(key)
            if conn is None or conn.closed:
                conn = await open_broker_connection(endpoint[0], endpoint[1], self.client_id, self.security,
                                                    timeout=CONNECT_TIMEOUT_S)
                self._connections[key] = conn
        return key, conn

    async def request(self, broker: int, api_key: int, version: int, body: Any, timeout_s: float) -> Any:
        """Send ``body`` to ``broker`` and decode its answer; any failure closes the connection and raises."""
        if self.faults is not None:
            await self.faults.resumed.wait()
            if self.faults.isolated:  # cut off: no request leaves, and open connections go too
                await self.close()
                raise ConnectionError("isolated (fault injection)")
        key, conn = await self._connection(broker)
        schemas = entity_schemas(api_key, version)
        try:
            frame, offset = await conn.request(api_key, version, encode_entity(body),
                                               flexible_request=schemas.flexible_request,
                                               flexible_response=schemas.flexible_response, timeout=timeout_s)
            return decode_entity(schemas.response, frame, offset)
        except BaseException:
            if self._connections.get(key) is conn:
                del self._connections[key]
            conn.close()
            raise

    async def close(self) -> None:
        for conn in list(self._connections.values()):
            conn.close()
            await conn.wait_closed()
        self._connections.clear()
