"""A TCP proxy in front of one broker that can lose a Produce response: the fault behind "possibly persisted".

A client that sends a Produce request and loses the connection before the response cannot know whether the broker
wrote the batch; librdkafka marks its messages "possibly persisted" and retries them. Nothing in a broker or an OS
makes that happen on demand, so this proxy does it: armed with :meth:`FaultProxy.lose_next_produce_response`, it
forwards the next Produce request, waits for the broker's answer (so the batch is written), throws the answer away,
closes every connection and then refuses new ones (accept, then close at once) until :meth:`FaultProxy.heal`. The
broker advertises the proxy's port (its ``advertised.listeners``), so clients reach it only through here.

Pure stdlib; the proxy runs on an event loop of its own thread so blocking tests and clients can drive it.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

PRODUCE = 0  # Kafka's api key of Produce


@dataclass(frozen=True)
class LostResponse:
    """A Produce request that reached the broker and whose response the client never got."""

    correlation_id: int
    api_version: int
    request_bytes: int
    at: float  # time.monotonic() when the response was thrown away


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


class FaultProxy:
    """Forwards whole Kafka frames between clients and one broker; can lose a Produce response and refuse
    connections until healed."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)
        self.thread.start()
        self.target: tuple[str, int] | None = None
        self.refusing = False
        self.refused = 0  # connections accepted and closed while refusing
        self.lost: list[LostResponse] = []
        self.lost_event = threading.Event()
        self._armed = False
        # client connection -> (correlation id, api version, size) of the request whose response is to be lost
        self._doomed: dict[asyncio.StreamWriter, tuple[int, int, int]] = {}
        self._connections: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server = self._call(self._listen())
        self.port: int = self._server.sockets[0].getsockname()[1]

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_server(self._accept, self.host, 0)

    # --- the faults, called from any thread ----------------------------------------------------------------

    def point_at(self, host: str, port: int) -> None:
        """The broker to forward to (known only once it has bound its own port)."""
        self.target = (host, port)

    def lose_next_produce_response(self) -> None:
        self.lost_event.clear()
        self._armed = True

    def refuse(self) -> None:
        """Close every connection and refuse new ones until :meth:`heal`."""
        self._call(self._refuse())

    def heal(self) -> None:
        self.refusing = False

    def close(self) -> None:
        try:
            self._call(self._close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)

    # --- the loop's side -----------------------------------------------------------------------------------

    async def _refuse(self) -> None:
        self.refusing = True
        for writer in list(self._connections):
            writer.close()

    async def _close(self) -> None:
        self._server.close()
        await self._refuse()
        await self._server.wait_closed()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self.refusing or self.target is None:
            self.refused += 1
            client_writer.close()
            return
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.close()
            return
        self._connections.update((client_writer, server_writer))
        # either side going away (or the proxy closing both) ends both directions; their errors are that ending
        await asyncio.gather(self._requests(client_reader, server_writer, client_writer),
                             self._responses(server_reader, client_writer), return_exceptions=True)
        for w in (client_writer, server_writer):
            self._connections.discard(w)
            w.close()
        self._doomed.pop(client_writer, None)

    async def _requests(self, reader: asyncio.StreamReader, server: asyncio.StreamWriter,
                        client: asyncio.StreamWriter) -> None:
        try:
            while True:
                frame = await _read_frame(reader)
                api_key, api_version, correlation_id = struct.unpack(">hhi", frame[:8])
                if api_key == PRODUCE and self._armed and client not in self._doomed:
                    self._armed = False
                    self._doomed[client] = (correlation_id, api_version, len(frame))
                server.write(struct.pack(">i", len(frame)) + frame)
                await server.drain()
        finally:
            server.close()
            client.close()

    async def _responses(self, reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        try:
            while True:
                frame = await _read_frame(reader)
                (correlation_id,) = struct.unpack(">i", frame[:4])
                doomed = self._doomed.get(client)
                if doomed is not None and doomed[0] == correlation_id:
                    # the broker has answered, so the batch is written: the client must never learn it
                    self.lost.append(LostResponse(*doomed, time.monotonic()))
                    await self._refuse()
                    self.lost_event.set()
                    return
                client.write(struct.pack(">i", len(frame)) + frame)
                await client.drain()
        finally:
            client.close()
