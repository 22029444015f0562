"""A small blocking Kafka client over kio, for the CLI and for tests that need exact control of requests.

It speaks one request at a time on one connection and picks the highest version both sides support, the same
negotiation real clients do, so ``odradek topics`` works against any Kafka-compatible broker. Framing is
:class:`odradek.protocol.client.BlockingConnection`'s, as for every other odradek client.

On a secured listener it does what Kafka's clients do: TLS from the security's ``ssl_context``, then ApiVersions,
then the SASL exchange (:mod:`odradek.security.sasl_client`, the same one brokers use towards each other) before
anything else; when the broker gives the session a lifetime (KIP-368) it authenticates again before it runs out.
Build the security from a ``--command-config`` file with :func:`odradek.security.client_config.client_security`.
"""

from __future__ import annotations

from typing import Any

from odradek.clock import Clock, SystemClock
from odradek.protocol.client import BlockingConnection
from odradek.protocol.entities import decode_entity, encode_entity, entity_schemas
from odradek.security.broker_client import PLAINTEXT, REAUTH_FRACTION, OutgoingSecurity
from odradek.security.sasl_client import (
    AUTHENTICATE_VERSION,
    HANDSHAKE_VERSION,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    AuthenticationFailed,
    authenticate_request,
    check_authenticate,
    check_handshake,
    handshake_request,
    sasl_tokens,
)
from odradek.security.scram import ScramFormatError

API_VERSIONS = 18


class KafkaConnection:
    def __init__(self, bootstrap: str, client_id: str = "odradek-cli", timeout: float = 30.0,
                 security: OutgoingSecurity = PLAINTEXT, clock: Clock | None = None) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.security = security
        self.clock = clock or SystemClock()
        self.reauthenticate_at_ms: int | None = None
        """When the next request first authenticates again (KIP-368), on ``clock``'s monotonic time."""
        self._conn = BlockingConnection(host or "127.0.0.1", int(port), client_id, timeout=timeout,
                                        ssl_context=security.ssl_context)
        self.versions: dict[int, tuple[int, int]] = {}
        try:
            response = self.request(API_VERSIONS, entity_schemas(API_VERSIONS, 0).request(), version=0)
            self.versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
            if security.mechanism is not None:
                self.authenticate()
        except BaseException:
            self.close()
            raise

    def authenticate(self) -> None:
        """The SASL exchange, first or again: :class:`AuthenticationFailed` when the broker refuses it."""
        security = self.security
        assert security.mechanism is not None
        check_handshake(self._exchange(SASL_HANDSHAKE, HANDSHAKE_VERSION, handshake_request(security.mechanism)),
                        security.mechanism)
        steps = sasl_tokens(security.mechanism, security.username, security.password)
        token = next(steps)
        while True:
            answer = self._exchange(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, authenticate_request(token))
            check_authenticate(answer, security.username)
            try:
                token = steps.send(bytes(answer.auth_bytes))
            except StopIteration:
                break
            except ScramFormatError as exc:
                raise AuthenticationFailed(f"SCRAM exchange failed: {exc}") from None
        lifetime_ms = answer.session_lifetime.total_seconds() * 1000
        self.reauthenticate_at_ms = (self.clock.monotonic_ms() + int(lifetime_ms * REAUTH_FRACTION)
                                     if lifetime_ms > 0 else None)

    def _exchange(self, api_key: int, version: int, body: Any) -> Any:
        frame, offset = self._send(api_key, body, version)
        return decode_entity(entity_schemas(api_key, version).response, frame, offset)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def version_for(self, api_key: int, highest: int) -> int:
        low, high = self.versions.get(api_key, (0, -1))
        version = min(high, highest)
        if version < low:
            raise RuntimeError(f"broker does not support API {api_key} at a version this client knows")
        return version

    def request(self, api_key: int, body: Any, version: int | None = None) -> Any:
        """Send ``body`` (a kio request entity of the chosen version) and return the decoded response."""
        if version is None:
            version = int(type(body).__version__)
        frame, offset = self.request_frame(api_key, body, version)
        return decode_entity(entity_schemas(api_key, version).response, frame, offset)

    def request_frame(self, api_key: int, body: Any, version: int) -> tuple[memoryview, int]:
        """Send ``body`` and return the undecoded response frame and where its body starts, for the responses
        kio's readers refuse although Kafka sends them (a -1 timestamp, say)."""
        if self.reauthenticate_at_ms is not None and self.clock.monotonic_ms() >= self.reauthenticate_at_ms:
            self.authenticate()
        return self._send(api_key, body, version)

    def _send(self, api_key: int, body: Any, version: int) -> tuple[memoryview, int]:
        schemas = entity_schemas(api_key, version)
        return self._conn.request(api_key, version, encode_entity(body), flexible_request=schemas.flexible_request,
                                  flexible_response=schemas.flexible_response)
