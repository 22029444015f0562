"""SASL/PLAIN (RFC 4616) on the server side, as Kafka's PlainSaslServer checks it.

The one client message is ``[authzid] NUL authcid NUL passwd``; the users and their passwords are the listener's
JAAS ``user_<name>="<password>"`` options. Kafka's messages reach the client as they are (they say nothing a
client could not already know), and the password comparison takes constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from odradek.security.sasl_errors import SaslAuthenticationError


class PlainServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id: str | None = None

    async def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        tokens = text.split("\0")
        if len(tokens) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare against something even for an unknown user, so the answer takes as long either way
        matches = hmac.compare_digest((expected if expected is not None else "\0" + password).encode(),
                                      password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


def plain_client_token(username: str, password: str) -> bytes:
    """The client's one PLAIN message (no authorization id: the username is the principal)."""
    return f"\0{username}\0{password}".encode()
