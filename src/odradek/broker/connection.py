"""One client connection: read frames, dispatch them one at a time, write responses in request order.

Like Kafka's SocketServer, a connection has one request in flight inside the broker at a time (Kafka mutes the
channel until the response is sent), so pipelined requests are answered in order and a producer's batches for a
partition are appended in the order it sent them. Anything unparseable closes this connection only, with one log
line naming the peer and the reason. A client over its quota (Kafka's KIP-219) gets its response at once, with the
throttle time in it, and then nothing more is read from it until the throttle time has passed. A handler that fails
on a well-formed request is our bug, not the client's: it is logged as an internal error with its traceback and
answered with UNKNOWN_SERVER_ERROR where the response has a top-level error code (otherwise the connection is
closed, and the client retries).

On a SASL listener (:mod:`odradek.security.sasl`) the connection serves only ApiVersions, SaslHandshake and
SaslAuthenticate (and raw v0 tokens) until the client has authenticated; anything else, a failed exchange, or a
request after the session expired closes it with one log line, after ``connection.failed.authentication.delay.ms``
where Kafka delays it. The principal the exchange establishes is what every later request carries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Protocol

from kio.index import load_response_schema

from odradek.broker.apis import Encoded, RequestContext, produce
from odradek.broker.faults import FaultState
from odradek.broker.link.resent_requests import LARGE_BODY
from odradek.broker.services import Services
from odradek.clock import Clock
from odradek.coordination.store import ConnectionLossError, SessionExpiredError
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.controller_requests import (
    RequestFormatError,
    decode_request,
    encode_body,
    frame_response,
    parse_request_frame,
)
from odradek.protocol.entities import empty_entity, encode_entity, forbidden_null
from odradek.protocol.framing import (
    FrameError,
    decode_body,
    peek_key_version,
    request_schema,
)
from odradek.protocol.ibp import controller_request_refusal
from odradek.protocol.wire import SIZE, WireFormatError, read_request_header, response_header
from odradek.security.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslConnection, SaslSettings, State

log = logging.getLogger(__name__)


class ControllerRequestRefused(FrameError):
    """A controller request at a version odradek does not serve: the sender's IBP is not odradek's. A Kafka
    controller resends every 100 ms on a new connection, so the explanation is logged once per API version in
    each process, and each closed connection after it only at debug level."""

    _explained: set[tuple[int, int]] = set()

    def __init__(self, api_key: int, version: int) -> None:
        super().__init__(controller_request_refusal(api_key, version))
        self.key = (api_key, version)

    def log(self, peer: object) -> None:
        if self.key in self._explained:
            log.debug("closing connection %s: %s", peer, self)
            return
        self._explained.add(self.key)
        log.error("closing connection %s: %s", peer, self)

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


COORDINATOR_APIS = frozenset({10, 22})
"""FindCoordinator and InitProducerId: a client retries COORDINATOR_NOT_AVAILABLE from them, as from Kafka."""
PARKED = object()
"""What :meth:`Connection._produce` returns for a produce whose response an in-order writer sends later."""
MAX_PARKED_PRODUCES = 100
# after a failed authentication's response, how long the broker waits for the client to close first: a close that
# races the response sends FIN (or RST over unread input) right behind it, and kafka-python 3.0 drops data that
# arrives in the same read as the end of the stream, so it would report a disconnect instead of the refusal
FAILED_AUTHENTICATION_LINGER_S = 2.0
"""Produces of one connection waiting for replication at once; past it the connection reads nothing more until they
are answered (librdkafka's max.in.flight is 1,000,000 without idempotence: TCP back-pressure takes over here)."""


class Listener(Protocol):
    """What a connection needs of the listener that accepted it: whether it may serve yet, or still, and the clock
    its idle time is measured on."""

    serving: asyncio.Event
    stopping: bool
    faults: FaultState
    clock: Clock


class Connection:
    def __init__(self, services: Services, listener: Listener, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, listener_name: str = "PLAINTEXT",
                 sasl: SaslSettings | None = None) -> None:
        """``listener_name``: the listener that accepted the connection; ``sasl``: its SASL settings when its
        security protocol is SASL_PLAINTEXT or SASL_SSL (the client must authenticate before anything else)."""
        self.services = services
        self.listener = listener
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = peer[0] if peer else ""
        self.principal = "User:ANONYMOUS"  # until the listener authenticates the client
        self.listener_name = listener_name
        self.sasl = SaslConnection(sasl, listener.clock.monotonic_ms) if sasl is not None else None
        self._tail: asyncio.Future[None] | None = None  # the writer of the last parked produce response
        self._parked = 0
        self._muted_until_ms = 0  # on the quota clock: the client is throttled until then
        self.last_active_ms = listener.clock.monotonic_ms()  # the last request read or response written
        self._handling = False
        self.expired = False

    def idle_since(self) -> int | None:
        """When this connection last read or wrote, or None while a request of it is being handled (or it is
        already being closed): what connections.max.idle.ms is measured from."""
        if self._handling or self._parked or self.expired:
            return None
        return self.last_active_ms

    def expire(self) -> None:
        """Close it for having been idle (the serving loop ends on the closed socket)."""
        self.expired = True
        self.writer.close()

    def _touch(self) -> None:
        self.last_active_ms = self.listener.clock.monotonic_ms()

    async def serve(self) -> None:
        max_bytes = self.services.config["socket.request.max.bytes"]
        stats = self.services.stats
        listener = self.listener
        try:
            # The listener opens early (the port must be known to register it); requests wait for start-up.
            await listener.serving.wait()
            while not (listener.stopping or listener.faults.isolated):
                await listener.faults.resumed.wait()
                if self._muted_until_ms:  # only a client ever throttled pays for the check
                    await self._throttled()
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
                if self._muted_until_ms:  # a parked produce may have been throttled while this was read
                    await self._throttled()
                started = time.perf_counter()
                self._touch()
                self._handling = True
                key = int.from_bytes(frame[:2], "big") if len(frame) >= 2 else -1
                sasl = self.sasl
                if sasl is not None and (key in (SASL_HANDSHAKE, SASL_AUTHENTICATE) or not sasl.authenticated
                                         or sasl.session_expired()):
                    if not await self._sasl_step(frame, key):
                        return
                    self._handling = False
                    self._touch()
                    continue
                if key == PRODUCE_KEY:
                    out = await self._produce(frame, started)
                    if out is PARKED:
                        self._handling = False
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
                self._handling = False
                self._touch()
                if key >= 0:
                    stats.request_done(key, (time.perf_counter() - started) * 1000, size, out_size)
        except ControllerRequestRefused as exc:
            exc.log(self.peer)
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

    async def _sasl_step(self, frame: bytes, key: int) -> bool:
        """One frame of a connection that has not (or no longer) authenticated: a raw v0 token, or a request the
        SASL state allows (answered), or anything else (the connection closes). False: close the connection."""
        auth = self.sasl
        assert auth is not None
        if auth.raw and auth.state is State.AUTHENTICATE:
            result = await auth.authenticate(bytes(frame), 0)
            if auth.failure is not None:
                return await self._authentication_failed(None)
            write_chunks(self.writer, [SIZE.pack(len(result.auth_bytes)), result.auth_bytes])
            await self.writer.drain()
            self._take_principal()
            return True
        if auth.session_expired() and key != SASL_HANDSHAKE:
            log.info("closing connection %s on listener %s: the SASL session of %s expired and it did not "
                     "re-authenticate", self.peer, self.listener_name, auth.principal)
            return False
        api = self.services.apis.get(key)
        name = api.__name__.rsplit(".", 1)[1].upper() if api is not None else f"key {key}"
        exchanging = auth.state is State.AUTHENTICATE
        if auth.refusal(key, name) is not None:
            # Kafka answers a stray request during the token exchange with that request's error response
            # (ILLEGAL_SASL_STATE); during the handshake it just closes
            return await self._authentication_failed(self._illegal_sasl_state(frame) if exchanging else None)
        reauthentications = auth.reauthentications
        out = await self.dispatch(frame)
        if key == API_VERSIONS_KEY and int.from_bytes(frame[2:4], "big") <= self.services.apis[key].MAX_VERSION:
            auth.api_versions_answered()  # a too-new version got KIP-511's error: the client may ask again
        if auth.reauthentications != reauthentications:
            log.info("connection %s on listener %s re-authenticated as %s (session lifetime %d ms)", self.peer,
                     self.listener_name, auth.principal, auth.settings.reauth_ms)
        if auth.failure is not None:
            return await self._authentication_failed(out)
        if out:
            write_chunks(self.writer, out)  # type: ignore[arg-type]
            await self.writer.drain()
        self._take_principal()
        return True

    def _illegal_sasl_state(self, frame: bytes) -> list[bytes | bytearray | memoryview] | None:
        """ILLEGAL_SASL_STATE as the request's own response, where that response has a top-level error code."""
        try:
            key, version, correlation_id = peek_key_version(frame)
        except FrameError:
            return None
        api = self.services.apis.get(key)
        if api is None or getattr(api, "RAW", False) or not api.MIN_VERSION <= version <= api.MAX_VERSION:
            return None
        cls = load_response_schema(key, version)
        if "error_code" not in cls.__dataclass_fields__:
            return None
        return encode_response(correlation_id, empty_entity(cls, error_code=ErrorCode.illegal_sasl_state))

    def _take_principal(self) -> None:
        auth = self.sasl
        if auth is not None and auth.authenticated and auth.principal is not None:
            if self.principal != auth.principal:
                log.debug("connection %s on listener %s authenticated as %s with %s", self.peer, self.listener_name,
                          auth.principal, auth.mechanism)
            self.principal = auth.principal

    async def _authentication_failed(self, response: list[bytes | bytearray | memoryview] | None) -> bool:
        """Kafka's failed authentication: after ``connection.failed.authentication.delay.ms`` send the failure
        response (if the exchange has one) and close, with one log line."""
        auth = self.sasl
        assert auth is not None
        delay_ms = auth.settings.failed_delay_ms
        if delay_ms > 0:
            await self.listener.clock.sleep(delay_ms / 1000)
        if response:
            write_chunks(self.writer, response)
            await self.writer.drain()
            await self._linger()
        reason = auth.failure or ""
        log.info("closing connection %s on listener %s: failed authentication (%s)", self.peer, self.listener_name,
                 reason if reason.isprintable() else ascii(reason))  # client bytes: never raw into the log
        return False

    async def _linger(self) -> None:
        """Let the client close first (its input read and dropped) for up to FAILED_AUTHENTICATION_LINGER_S, as a
        web server's lingering close does, so the last response is read before the connection ends."""
        async def until_eof() -> None:
            try:
                while await self.reader.read(LARGE_CHUNK):
                    pass
            except ConnectionError:
                pass

        eof = asyncio.ensure_future(until_eof())
        timeout = asyncio.ensure_future(self.listener.clock.sleep(FAILED_AUTHENTICATION_LINGER_S))
        try:
            await asyncio.wait((eof, timeout), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (eof, timeout):
                task.cancel()

    async def _produce(self, frame: bytes, started: float) -> Any:
        """Run a Produce up to its appends; if it then only waits for replication (acks=all), hand it to an
        in-order writer and return PARKED, so the next request is read while replication goes on. Kafka mutes a
        connection for the whole request; here the appends still happen strictly in request order (the next
        request is read only after this one appended), and a request without a transactional id appends without
        yielding to the event loop: every Produce already buffered on the connection is appended before a
        follower's fetch is answered, so one replication round acknowledges all of them instead of one round each
        (librdkafka without idempotence sends each record as its own request with ``linger.ms=0``)."""
        decoded = self._decode(frame)
        if isinstance(decoded, list):
            return decoded
        api, ctx, request = decoded
        try:
            if request.transactional_id is None:
                appended = produce.append_now(ctx, request)
            else:
                appended = await produce.append(ctx, request)
            if not appended.waits:
                return self._answer(ctx, await appended.response())
        except (TypeError, AttributeError, ValueError) as exc:
            return self._handler_failed(api, ctx, request, exc)
        except KafkaError as exc:
            return self._request_error(ctx.correlation_id, ctx, api.__name__.rsplit(".", 1)[1], exc)
        self._parked += 1
        self._tail = asyncio.ensure_future(self._write_after(self._tail, ctx, appended, started))
        return PARKED

    async def _write_after(self, previous: asyncio.Future[None] | None, ctx: RequestContext,
                           appended: produce.Appended, started: float) -> None:
        try:
            response = await appended.response()
            if previous is not None:
                await previous
            out = self._answer(ctx, response)
            out_size = sum(map(len, out)) if out else 0
            if out:
                write_chunks(self.writer, out)
                await self.writer.drain()
            self._touch()
            self.services.stats.request_done(PRODUCE_KEY, (time.perf_counter() - started) * 1000, ctx.size,
                                             out_size)
        except (ConnectionError, asyncio.CancelledError):
            self.writer.close()
        except Exception:
            log.exception("closing connection %s after an unexpected error", self.peer)
            self.writer.close()
        finally:
            self._parked -= 1

    async def dispatch(self, frame: bytes) -> list[bytes | bytearray | memoryview] | None:
        api = self.services.apis.get(peek_key_version(frame)[0])
        if getattr(api, "RAW", False):
            return await self._dispatch_raw(api, frame)
        decoded = self._decode(frame)
        if isinstance(decoded, list):
            return decoded
        api, ctx, request = decoded
        try:
            response = await api.handle(ctx, request)
        except (TypeError, AttributeError, ValueError) as exc:
            return self._handler_failed(api, ctx, request, exc)
        except KafkaError as exc:
            # A request-wide failure the handler chose not to fold into its response itself.
            return self._request_error(ctx.correlation_id, ctx, api.__name__.rsplit(".", 1)[1], exc)
        except (ConnectionLossError, SessionExpiredError) as exc:
            # The coordination store is out of reach (a ZooKeeper connection lost, a session expired): a passing
            # condition, answered with a retriable error rather than a closed connection.
            name = api.__name__.rsplit(".", 1)[1]
            log.warning("%s v%d from %s failed: coordination store unavailable (%s)", name, ctx.api_version,
                        self.peer, type(exc).__name__)
            code = (ErrorCode.coordinator_not_available if ctx.api_key in COORDINATOR_APIS
                    else ErrorCode.request_timed_out)
            return self._request_error(ctx.correlation_id, ctx, name, KafkaError(code, "coordination unavailable"))
        return self._answer(ctx, response)

    def _decode(self, frame: bytes) -> tuple[Any, RequestContext, Any] | list[bytes | bytearray | memoryview]:
        """The API module, context and request of a frame (kio-decoded), or a response already framed (ApiVersions
        too new). Raises FrameError for what cannot be served."""
        key, version, correlation_id = peek_key_version(frame)
        apis = self.services.apis
        api = apis.get(key)
        if api is None:
            raise FrameError(f"unknown API key {key} (version {version})")
        if key == API_VERSIONS_KEY and version > api.MAX_VERSION:
            # KIP-511: answer a too-new ApiVersions with a v0 response carrying the error and its own range.
            return encode_response(correlation_id, api.unsupported_version_response(apis))
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
                             principal=self.principal, listener=self.listener_name, sasl=self.sasl,
                             size=len(frame))
        return api, ctx, request

    def _handler_failed(self, api: Any, ctx: RequestContext, request: Any,
                        exc: Exception) -> list[bytes | bytearray | memoryview]:
        name = api.__name__.rsplit(".", 1)[1]
        null = forbidden_null(request)
        if null is not None:
            # kio decodes a null where the schema forbids one (an array length of -1, say); such a request is
            # malformed, and the answer to a malformed request is a closed connection, not a guess.
            raise FrameError(f"{name} v{ctx.api_version} request is malformed: {null} is null") from exc
        log.exception("internal error handling %s v%d from %s", name, ctx.api_version, self.peer)
        return self._internal_error(ctx.correlation_id, ctx, name)

    def _answer(self, ctx: RequestContext, response: Any) -> list[bytes | bytearray | memoryview] | None:
        """The framed response (None for an acks=0 produce); a client over its quota is muted from now on."""
        if ctx.throttle_ms > 0:
            self._mute(ctx.throttle_ms)
        if response is None:
            return None
        if isinstance(response, Encoded):
            return frame_encoded(ctx.correlation_id, ctx.response_class.__header_schema__.__flexible__, response)
        return encode_response(ctx.correlation_id, response)

    def _mute(self, throttle_ms: int) -> None:
        """Kafka's ThrottledChannel: the throttle runs from when it was decided; the response still goes out."""
        until = self.services.quotas.clock.monotonic_ms() + throttle_ms
        self._muted_until_ms = max(self._muted_until_ms, until)

    async def _throttled(self) -> None:
        clock = self.services.quotas.clock
        while (left := self._muted_until_ms - clock.monotonic_ms()) > 0:
            await clock.sleep(left / 1000)

    @staticmethod
    def _internal_error(correlation_id: int, ctx: RequestContext, name: str) -> list[bytes | bytearray | memoryview]:
        cls = ctx.response_class
        if "error_code" not in cls.__dataclass_fields__:
            raise FrameError(f"internal error handling {name} v{ctx.api_version}; its response has no error code")
        return encode_response(correlation_id, empty_entity(cls, error_code=ErrorCode.unknown_server_error))

    @staticmethod
    def _request_error(correlation_id: int, ctx: RequestContext, name: str,
                       exc: KafkaError) -> list[bytes | bytearray | memoryview]:
        """A KafkaError raised out of a handler: the response's top-level error code (and message, where the
        version has one) is the answer; a response without a top-level error code cannot carry it, so the
        connection closes, as Kafka's SocketServer closes on a failure it cannot encode."""
        cls = ctx.response_class
        fields = cls.__dataclass_fields__
        if "error_code" not in fields:
            raise FrameError(f"{name} v{ctx.api_version} failed with {exc.code.name}; its response has no error code")
        values: dict[str, Any] = {"error_code": exc.code}
        if "error_message" in fields and exc.message:
            values["error_message"] = exc.message
        return encode_response(correlation_id, empty_entity(cls, **values))

    async def _dispatch_raw(self, api: Any, frame: bytes) -> list[bytes | bytearray | memoryview]:
        """The controller's APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown): Kafka's format,
        decoded by odradek's own codec because kio has none. A big request the controller sent again after its
        timeout is answered by the first copy's application (:mod:`odradek.broker.link.resent_requests`)."""
        key, version, _correlation_id = peek_key_version(frame)
        if not api.MIN_VERSION <= version <= api.MAX_VERSION:
            raise ControllerRequestRefused(key, version)
        try:
            header, body = parse_request_frame(frame)
        except RequestFormatError as exc:
            raise FrameError(f"malformed controller request (API {api.API_KEY} v{version}): {exc}") from exc
        resent = self.services.controller_requests.resent
        first = resent.first_of(header.api_key, body)
        if first is not None:
            try:
                encoded = await asyncio.shield(first)
            except asyncio.CancelledError:
                if not first.cancelled():
                    raise  # this connection's own cancellation
            else:
                log.info("controller request %d from %s is a resend of the one applied before it (%d bytes): "
                         "answered with that one's response", header.api_key, self.peer, len(body))
                return [frame_response(header.correlation_id, encoded)]
        pending = resent.begin(header.api_key, body)
        try:
            if len(body) > LARGE_BODY:
                # A 100,000-partition request takes a fraction of a second to decode: on a worker thread, so the
                # event loop keeps answering (and keeps the coordination session alive) while it runs.
                request = await asyncio.to_thread(decode_request, header.api_key, body)
            else:
                request = decode_request(header.api_key, body)
            ctx = RequestContext(self.services, header.api_key, header.api_version, header.correlation_id,
                                 header.client_id, self.client_host, principal=self.principal,
                                 listener=self.listener_name)
            encoded = encode_body(await api.handle(ctx, request))
        except BaseException as exc:
            if pending is not None:
                resent.abandon(pending)
            if isinstance(exc, RequestFormatError):
                raise FrameError(f"malformed controller request (API {api.API_KEY} v{version}): {exc}") from exc
            raise
        if pending is not None:
            pending.set_result(encoded)
        return [frame_response(header.correlation_id, encoded)]
