"""The client side of Kafka's SASL exchange, shared by every odradek connection that authenticates.

Brokers reaching other brokers (:mod:`odradek.security.broker_client`, asyncio) and the operator tools
(:class:`odradek.client.KafkaConnection`, blocking sockets) send the same requests: SaslHandshake v1 naming the
mechanism, then SaslAuthenticate v2 frames carrying the mechanism's tokens. :func:`sasl_tokens` is that exchange
without I/O: a generator that yields each token to send and receives the server's answer bytes, so each transport
only drives it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from odradek.errors import ErrorCode
from odradek.protocol.entities import entity_schemas
from odradek.security.plain import plain_client_token
from odradek.security.scram import MECHANISMS, ScramClient

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 2
CLIENT_MECHANISMS = ("PLAIN", *MECHANISMS)


class AuthenticationFailed(ConnectionError):
    """The server refused the credentials (or the mechanism): a connection error, with the server's message."""


def handshake_request(mechanism: str) -> Any:
    return entity_schemas(SASL_HANDSHAKE, HANDSHAKE_VERSION).request(mechanism=mechanism)


def check_handshake(response: Any, mechanism: str) -> None:
    if response.error_code != ErrorCode.none:
        raise AuthenticationFailed(f"SASL handshake with {mechanism} refused: {ErrorCode(response.error_code).name}"
                                   f" (enabled: {', '.join(response.mechanisms)})")


def authenticate_request(token: bytes) -> Any:
    return entity_schemas(SASL_AUTHENTICATE, AUTHENTICATE_VERSION).request(auth_bytes=token)


def check_authenticate(response: Any, username: str) -> None:
    if response.error_code != ErrorCode.none:
        raise AuthenticationFailed(f"SASL authentication as {username} refused: "
                                   f"{response.error_message or ErrorCode(response.error_code).name}")


def sasl_tokens(mechanism: str, username: str, password: str) -> Generator[bytes, bytes, None]:
    """Yields the tokens to send, in order; each ``send`` gives back the server's answer to the last one. SCRAM
    checks the server's signature at the end (:class:`~odradek.security.scram.ScramFormatError` when it is wrong)."""
    if mechanism == "PLAIN":
        yield plain_client_token(username, password)
        return
    if mechanism not in MECHANISMS:
        raise ValueError(f"SASL mechanism {mechanism} is not supported by odradek's clients "
                         f"({', '.join(CLIENT_MECHANISMS)})")
    scram = ScramClient(mechanism, username, password)
    server_first = yield scram.first_message()
    server_final = yield scram.final_message(server_first)
    scram.verify_final(server_final)
