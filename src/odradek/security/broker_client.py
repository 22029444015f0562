"""The one way a broker opens a connection to another broker: :func:`open_broker_connection`.

Follower fetchers (:mod:`odradek.broker.peer`), the transaction coordinator's peers (markers and verification,
:mod:`odradek.broker.txn.peers`) and the controller's channels and controlled-shutdown requests
(:mod:`odradek.controller.transport`) all connect here, to the target's inter-broker listener, with this broker's
:class:`OutgoingSecurity`: on a SASL listener the connection authenticates (SaslHandshake v1, then SaslAuthenticate)
with ``sasl.mechanism.inter.broker.protocol`` and the username and password of the listener's JAAS config for that
mechanism, as Kafka's inter-broker clients do, before it carries anything else. When the target gives the session a
lifetime (``connections.max.reauth.ms``, KIP-368), the connection re-authenticates in place before it runs out.

TLS goes here too: on an SSL or SASL_SSL inter-broker listener :attr:`OutgoingSecurity.ssl_context` is the client
context of :mod:`odradek.security.tls` (the listener's ``ssl.*`` settings, ``ssl.endpoint.identification.algorithm``
checking the target's name or address), handed to the socket as it opens, before any SASL.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.protocol.client import AsyncConnection
from odradek.protocol.entities import decode_entity, encode_entity, entity_schemas
from odradek.protocol.wire import Buffer
from odradek.security.listeners import ListenerConfig, listener_setting
from odradek.security.sasl import client_credentials
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
from odradek.security.scram import MECHANISMS, ScramFormatError
from odradek.security.tls import TlsSettings, client_context

log = logging.getLogger(__name__)

REAUTH_FRACTION = 0.85
"""Re-authenticate once this share of the session lifetime has gone (Kafka's clients pick 85-95%)."""


@dataclass(frozen=True, slots=True)
class OutgoingSecurity:
    """How this broker reaches the others: the inter-broker listener's name and protocol, the SASL mechanism and
    credentials on it, and the TLS context for SSL/SASL_SSL (None: plain TCP)."""

    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str = ""
    password: str = ""
    ssl_context: ssl.SSLContext | None = None

    @classmethod
    def from_config(cls, values: Mapping[str, Any], listeners: ListenerConfig) -> OutgoingSecurity:
        """The inter-broker listener's security from the broker's settings (refused at start-up when incomplete)."""
        name = listeners.inter_broker
        protocol = listeners.protocol_map.get(name, "PLAINTEXT")
        context = None
        if protocol in ("SSL", "SASL_SSL"):
            # the inter-broker listener's ssl.* (listener.name.<l>.ssl.* first): its trust store checks the target,
            # its key store is this broker's client certificate when the target asks for one
            context = client_context(TlsSettings.resolve(lambda setting: listener_setting(values, name, setting)))
        if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
            return cls(name, protocol, ssl_context=context)
        mechanism = str(values.get("sasl.mechanism.inter.broker.protocol") or "GSSAPI").upper()
        if mechanism != "PLAIN" and mechanism not in MECHANISMS:
            raise ValueError(f"sasl.mechanism.inter.broker.protocol={mechanism} is not supported by odradek "
                             f"(PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default is GSSAPI)")
        username, password = client_credentials(values, name, mechanism)
        return cls(name, protocol, mechanism, username, password, context)


PLAINTEXT = OutgoingSecurity()


class BrokerConnection(AsyncConnection):
    """An :class:`AsyncConnection` that re-authenticates before its SASL session (if it has a lifetime) runs out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str | None,
                 security: OutgoingSecurity, **kwargs: Any) -> None:
        super().__init__(reader, writer, client_id, **kwargs)
        self.security = security
        self._reauth_at: float | None = None
        self._auth_lock = asyncio.Lock()

    async def request(self, api_key: int, api_version: int, body: Buffer, *, flexible_request: bool,
                      flexible_response: bool, timeout: float | None = None) -> tuple[bytes, int]:
        if self._reauth_at is not None and asyncio.get_running_loop().time() >= self._reauth_at:
            async with self._auth_lock:
                if self._reauth_at is not None and asyncio.get_running_loop().time() >= self._reauth_at:
                    await self.authenticate(timeout or 30.0)
        return await super().request(api_key, api_version, body, flexible_request=flexible_request,
                                     flexible_response=flexible_response, timeout=timeout)

    async def _sasl(self, api_key: int, version: int, body: Any, timeout: float) -> Any:
        schemas = entity_schemas(api_key, version)
        frame, offset = await super().request(api_key, version, encode_entity(body),
                                              flexible_request=schemas.flexible_request,
                                              flexible_response=schemas.flexible_response, timeout=timeout)
        return decode_entity(schemas.response, frame, offset)

    async def authenticate(self, timeout: float) -> None:
        """The SASL exchange (first or again): raises :class:`AuthenticationFailed` (the connection is closed)."""
        security = self.security
        mechanism = security.mechanism
        assert mechanism is not None
        try:
            check_handshake(await self._sasl(SASL_HANDSHAKE, HANDSHAKE_VERSION, handshake_request(mechanism),
                                             timeout), mechanism)
            steps = sasl_tokens(mechanism, security.username, security.password)
            token = next(steps)
            while True:
                answer = await self._sasl(SASL_AUTHENTICATE, AUTHENTICATE_VERSION, authenticate_request(token),
                                          timeout)
                check_authenticate(answer, security.username)
                try:
                    token = steps.send(bytes(answer.auth_bytes))
                except StopIteration:
                    break
        except ScramFormatError as exc:
            self.close()
            raise AuthenticationFailed(f"SCRAM exchange failed: {exc}") from None
        except AuthenticationFailed:
            self.close()
            raise
        lifetime_ms = answer.session_lifetime.total_seconds() * 1000
        self._reauth_at = (asyncio.get_running_loop().time() + lifetime_ms * REAUTH_FRACTION / 1000
                           if lifetime_ms > 0 else None)


async def open_broker_connection(host: str, port: int, client_id: str | None, security: OutgoingSecurity = PLAINTEXT,
                                 *, timeout: float, limit: int = 1 << 16) -> BrokerConnection:
    """Connect to another broker's inter-broker listener and authenticate as its security requires, all within
    ``timeout`` seconds. Every broker-to-broker and controller-to-broker connection opens here."""
    async with asyncio.timeout(timeout):
        reader, writer = await asyncio.open_connection(
            host, port, limit=limit, ssl=security.ssl_context,
            server_hostname=host if security.ssl_context is not None else None)
    conn = BrokerConnection(reader, writer, client_id, security)
    if security.mechanism is not None:
        try:
            await conn.authenticate(timeout)
        except AuthenticationFailed as exc:
            log.warning("%s: cannot authenticate to the broker at %s:%d: %s", client_id, host, port, exc)
            raise
        except BaseException:
            conn.close()
            raise
    return conn
