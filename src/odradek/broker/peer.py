"""An asyncio Kafka client connection between brokers (follower fetches, OffsetForLeaderEpoch).

Requests are kio entities; one request is in flight per connection, as a follower fetcher needs nothing more.
Any failure closes the connection and raises; the caller (a fetcher) backs off and reconnects.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

_SIZE = struct.Struct(">i")


class PeerConnection:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = itertools.count(1)

    async def connect(self, timeout: float = 5.0) -> None:
        self._reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, limit=1 << 22), timeout
        )

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def request(self, api_key: int, version: int, body: Any, timeout: float) -> Any:
        if self._reader is None or self._writer is None:
            await self.connect()
        # local references: close() from another task (a fetcher being stopped) must surface as a closed
        # connection here, not as an AttributeError on a reader that was set to None mid-request
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None
        schema = load_request_schema(api_key, version)
        header_cls: Any = schema.__header_schema__
        correlation = next(self._correlation)
        buf = io.BytesIO()
        entity_writer(header_cls)(
            buf,
            header_cls(
                request_api_key=api_key, request_api_version=version, correlation_id=correlation,
                client_id=self.client_id,
            ),
        )
        entity_writer(schema)(buf, body)
        payload = buf.getbuffer()
        try:
            writer.writelines([_SIZE.pack(len(payload)), payload])
            await writer.drain()
            (size,) = _SIZE.unpack(await asyncio.wait_for(reader.readexactly(4), timeout))
            frame = await asyncio.wait_for(reader.readexactly(size), timeout)
        except BaseException:
            self.close()
            raise
        response_cls = load_response_schema(api_key, version)
        header, offset = entity_reader(response_cls.__header_schema__)(frame, 0)
        if header.correlation_id != correlation:
            self.close()
            raise ConnectionError(f"correlation id {header.correlation_id} != {correlation}")
        response, _ = entity_reader(response_cls)(frame, offset)
        return response
