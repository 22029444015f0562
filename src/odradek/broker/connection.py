"""One client connection: read frames, dispatch them one at a time, write responses in request order.

Like Kafka's SocketServer, a connection has one request in flight inside the broker at a time (Kafka mutes the
channel until the response is sent), so pipelined requests are answered in order and a producer's batches for a
partition are appended in the order it sent them. Anything unparseable closes this connection only, with one log
line naming the peer and the reason. A handler that fails on a well-formed request is our bug, not the client's:
it is logged as an internal error with its traceback and answered with UNKNOWN_SERVER_ERROR where the response has a
top-level error code (otherwise the connection is closed, and the client retries).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from odradek.broker.apis import Encoded, RequestContext
from odradek.broker.faults import FaultState
from odradek.broker.services import Services
from odradek.controller.requests import (
    RequestFormatError,
    decode_request,
    encode_body,
    frame_response,
    parse_request_frame,
)
from odradek.errors import ErrorCode
from odradek.protocol.entities import empty_entity, encode_entity, forbidden_null
from odradek.protocol.framing import (
    FrameError,
    decode_body,
    peek_key_version,
    request_schema,
)
from odradek.protocol.wire import SIZE, WireFormatError, read_request_header, response_header

log = logging.getLogger(__name__)

API_VERSIONS_KEY = 18
PRODUCE_KEY = 0


def encode_response(correlation_id: int, response: Any) -> list[bytes | bytearray | memoryview]:
    """Frame a kio response entity: size, header (v0, or v1 with an empty tag buffer), body."""
    return frame_encoded(correlation_id, type(response).__header_schema__.__flexible__,
                         Encoded([encode_entity(response)]))


def frame_encoded(correlation_id: int, flexible_header: bool, encoded: Encoded) -> list[bytes | bytearray | memoryview]:
    header = response_header(correlation_id, flexible_header)
    size = len(header) + sum(len(b) for b in encoded.buffers)
    return [SIZE.pack(size) + header, *encoded.buffers]


LARGE_CHUNK = 64 * 1024
LARGE_CONTROLLER_BODY = 1 << 18  # controller requests above this (~5,000 partitions) are decoded off the event loop


def write_chunks(writer: asyncio.StreamWriter, chunks: list[bytes | bytearray | memoryview]) -> None:
    """Write a response without joining it: Python 3.11's ``writelines`` concatenates every chunk first.

    Small pieces (headers, partition entries) are coalesced so they leave in few packets; record sets of 64 KiB or
    more go to ``write`` as they are, which sends them straight from the log's buffer when the socket has room.
    """
    pending = bytearray()
    for chunk in chunks:
        if len(chunk) >= LARGE_CHUNK:
            if pending:
                writer.write(pending)
                pending = bytearray()
            writer.write(chunk)
        else:
            pending += chunk
    if pending:
        writer.write(pending)


PRODUCE_KEY = 0
PARKED = object()
"""What :meth:`Connection._produce` returns for a produce whose response an in-order writer sends later."""
MAX_PARKED_PRODUCES = 100
"""Produces of one connection waiting for replication at once; past it the connection reads nothing more until they
are answered (librdkafka's max.in.flight is 1,000,000 without idempotence: TCP back-pressure takes over here)."""


class Listener(Protocol):
    """What a connection needs of the listener that accepted it: whether it may serve yet, or still."""

    serving: asyncio.Event
    stopping: bool
    faults: FaultState


class Connection:
    def __init__(self, services: Services, listener: Listener, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.services = services
        self.listener = listener
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = peer[0] if peer else ""
        self.principal = "User:ANONYMOUS"  # until the listener authenticates the client
        self.listener_name = "PLAINTEXT"
        self._tail: asyncio.Future[None] | None = None  # the writer of the last parked produce response
        self._parked = 0

    async def serve(self) -> None:
        max_bytes = self.services.config["socket.request.max.bytes"]
        stats = self.services.stats
        listener = self.listener
        try:
            # The listener opens early (the port must be known to register it); requests wait for start-up.
            await listener.serving.wait()
            while not (listener.stopping or listener.faults.isolated):
                await listener.faults.resumed.wait()
                try:
                    prefix = await self.reader.readexactly(4)
                except asyncio.IncompleteReadError as exc:
                    if exc.partial:
                        log.info("connection %s closed mid-frame (%d of 4 size bytes)", self.peer, len(exc.partial))
                    return
                (size,) = SIZE.unpack(prefix)
                if size < 0 or size > max_bytes:
                    log.warning(
                        "closing connection %s: request of %d bytes exceeds socket.request.max.bytes=%d",
                        self.peer, size, max_bytes,
                    )
                    return
                try:
                    frame = await self.reader.readexactly(size)
                except asyncio.IncompleteReadError as exc:
                    log.info("connection %s closed mid-request (%d of %d bytes)", self.peer, len(exc.partial), size)
                    return
                started = time.perf_counter()
                key = int.from_bytes(frame[:2], "big") if len(frame) >= 2 else -1
                if key == PRODUCE_KEY:
                    out = await self._produce(frame, started)
                    if out is PARKED:
                        if self._parked >= MAX_PARKED_PRODUCES and self._tail is not None:
                            await self._tail
                        continue
                else:
                    out = await self.dispatch(frame)
                if self._tail is not None:
                    await self._tail  # an earlier produce still waits for replication: responses leave in order
                out_size = sum(map(len, out)) if out else 0
                if out:
                    write_chunks(self.writer, out)  # type: ignore[arg-type]
                    await self.writer.drain()
                if key >= 0:
                    stats.request_done(key, (time.perf_counter() - started) * 1000, size, out_size)
        except FrameError as exc:
            log.warning("closing connection %s: %s", self.peer, exc)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("closing connection %s after an unexpected error", self.peer)
        finally:
            if self._tail is not None and not self._tail.done():
                self._tail.cancel()
            self.writer.close()

    async def _produce(self, frame: bytes, started: float) -> Any:
        """Run a Produce; once its appends are done and it only waits for replication (acks=all), hand its response
        to an in-order writer and return PARKED, so the next request is read while replication goes on. Kafka
        mutes a connection for the whole request; here the appends still happen strictly in request order (the
        next request is read only after this one appended), but one replication round covers every request a
        pipelining producer (librdkafka's max.in.flight) has queued, instead of one round per request."""
        replicating = asyncio.Event()
        task = asyncio.ensure_future(self.dispatch(frame, replicating))
        signal = asyncio.ensure_future(replicating.wait())
        try:
            await asyncio.wait([task, signal], return_when=asyncio.FIRST_COMPLETED)
        finally:
            signal.cancel()
        if task.done():
            return task.result()
        self._parked += 1
        self._tail = asyncio.ensure_future(self._write_after(self._tail, task, started, len(frame)))
        return PARKED

    async def _write_after(self, previous: asyncio.Future[None] | None, task: asyncio.Future[Any],
                           started: float, request_size: int) -> None:
        try:
            if previous is not None:
                await previous
            out = await task
            out_size = sum(map(len, out)) if out else 0
            if out:
                write_chunks(self.writer, out)
                await self.writer.drain()
            self.services.stats.request_done(PRODUCE_KEY, (time.perf_counter() - started) * 1000, request_size,
                                             out_size)
        except (ConnectionError, asyncio.CancelledError):
            task.cancel()
            self.writer.close()
        except Exception:
            log.exception("closing connection %s after an unexpected error", self.peer)
            self.writer.close()
        finally:
            self._parked -= 1

    async def dispatch(self, frame: bytes, replicating: asyncio.Event | None = None,
                       ) -> list[bytes | bytearray | memoryview] | None:
        key, version, correlation_id = peek_key_version(frame)
        apis = self.services.apis
        api = apis.get(key)
        if api is None:
            raise FrameError(f"unknown API key {key} (version {version})")
        if key == API_VERSIONS_KEY and version > api.MAX_VERSION:
            # KIP-511: answer a too-new ApiVersions with a v0 response carrying the error and our ranges.
            return encode_response(correlation_id, api.unsupported_version_response(apis))
        if getattr(api, "RAW", False):
            return await self._dispatch_raw(api, frame)
        if not api.MIN_VERSION <= version <= api.MAX_VERSION:
            raise FrameError(
                f"unsupported version {version} of API {key} (supported {api.MIN_VERSION}-{api.MAX_VERSION})"
            )
        schema = request_schema(key, version)
        if schema is None:
            raise FrameError(f"no schema for API {key} version {version}")
        try:
            header, body_offset = read_request_header(frame, schema.__header_schema__.__flexible__)
        except WireFormatError as exc:
            raise FrameError(f"malformed request header: {exc}") from exc
        request = decode_body(frame, schema, body_offset)
        ctx = RequestContext(self.services, key, version, correlation_id, header.client_id, self.client_host,
                             replicating, self.principal, self.listener_name)
        try:
            response = await api.handle(ctx, request)
        except (TypeError, AttributeError, ValueError) as exc:
            name = api.__name__.rsplit(".", 1)[1]
            null = forbidden_null(request)
            if null is not None:
                # kio decodes a null where the schema forbids one (an array length of -1, say); such a request is
                # malformed, and the answer to a malformed request is a closed connection, not a guess.
                raise FrameError(f"{name} v{version} request is malformed: {null} is null") from exc
            log.exception("internal error handling %s v%d from %s", name, version, self.peer)
            return self._internal_error(correlation_id, ctx, name)
        if response is None:  # acks=0 produce: no response at all
            return None
        if isinstance(response, Encoded):
            flexible = ctx.response_class.__header_schema__.__flexible__
            return frame_encoded(correlation_id, flexible, response)
        return encode_response(correlation_id, response)

    @staticmethod
    def _internal_error(correlation_id: int, ctx: RequestContext, name: str) -> list[bytes | bytearray | memoryview]:
        cls = ctx.response_class
        if "error_code" not in cls.__dataclass_fields__:
            raise FrameError(f"internal error handling {name} v{ctx.api_version}; its response has no error code")
        return encode_response(correlation_id, empty_entity(cls, error_code=ErrorCode.unknown_server_error))

    async def _dispatch_raw(self, api: Any, frame: bytes) -> list[bytes | bytearray | memoryview]:
        """The controller's APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown): Kafka's format,
        decoded by odradek's own codec because kio has none."""
        key, version, _correlation_id = peek_key_version(frame)
        if not api.MIN_VERSION <= version <= api.MAX_VERSION:
            raise FrameError(
                f"unsupported version {version} of API {key} (supported {api.MIN_VERSION}-{api.MAX_VERSION})"
            )
        try:
            header, body = parse_request_frame(frame)
            if len(body) > LARGE_CONTROLLER_BODY:
                # A 100,000-partition request takes a fraction of a second to decode: on a worker thread, so the
                # event loop keeps answering (and keeps the coordination session alive) while it runs.
                request = await asyncio.to_thread(decode_request, header.api_key, body)
            else:
                request = decode_request(header.api_key, body)
        except RequestFormatError as exc:
            raise FrameError(f"malformed controller request (API {api.API_KEY} v{version}): {exc}") from exc
        ctx = RequestContext(self.services, header.api_key, header.api_version, header.correlation_id,
                             header.client_id, self.client_host, None, self.principal, self.listener_name)
        response = await api.handle(ctx, request)
        return [frame_response(header.correlation_id, encode_body(response))]
