"""The server side of one SCRAM exchange, as Kafka's ScramSaslServer runs it.

client-first (``n,[a=authzid],n=user,r=cnonce``) → the user's stored credential for this mechanism (from
``/config/users/<user>``) → server-first (``r=cnonce+snonce,s=salt,i=iterations``) → client-final
(``c=...,r=cnonce+snonce,p=proof``): the nonce must be the one this server sent, the channel binding must repeat
the client's GS2 header, and ``H(proof XOR HMAC(StoredKey, AuthMessage))`` must be the stored key → server-final
(``v=signature``). An unknown user, a wrong proof and a forged nonce all fail the same generic way towards the client
(Kafka's SaslException), so the answer does not say which users exist; an authorization id other than the user is
Kafka's SaslAuthenticationException with its message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Awaitable, Callable

from odradek.security.sasl_errors import SaslAuthenticationError, SaslExchangeError
from odradek.security.scram import (
    CLIENT_FINAL,
    CLIENT_FIRST,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramFormatError,
    gs2_header,
    nonce,
    parse,
    username_of,
)

CredentialLookup = Callable[[str, str], Awaitable[ScramCredential | None]]
"""``(mechanism, username) -> credential``: where the stored credentials come from (``/config/users``)."""


class ScramServer:
    def __init__(self, mechanism: str, credentials: CredentialLookup,
                 server_nonce: Callable[[], str] = nonce) -> None:
        """``server_nonce``: this server's half of the nonce (random; fixed only to replay RFC test vectors)."""
        self.mechanism = mechanism
        self._server_nonce = server_nonce
        self.algorithm = MECHANISMS[mechanism]
        self._credentials = credentials
        self.complete = False
        self.authorization_id: str | None = None
        self._first_bare = ""
        self._gs2 = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    async def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslExchangeError("Unexpected challenge in Sasl server state COMPLETE")
        try:
            if self._credential is None:
                return await self._first(token)
            return self._final(token, self._credential)
        except ScramFormatError as exc:
            raise SaslExchangeError(str(exc)) from None

    async def _first(self, token: bytes) -> bytes:
        match = parse(CLIENT_FIRST, token, "client first message")
        username = username_of(match["name"])
        credential = await self._credentials(self.mechanism, username)
        if credential is None:
            raise SaslExchangeError(f"Authentication failed: Invalid user credentials (no {self.mechanism} "
                                    f"credential for {username!r})")
        authzid = match["authzid"]
        if authzid and username_of(authzid) != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslExchangeError(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                                    f"for {self.mechanism}")
        text = token.decode()
        self._first_bare = match["bare"]
        self._gs2 = gs2_header(text)
        self._nonce = match["nonce"] + self._server_nonce()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._credential = credential
        self.authorization_id = username
        return self._server_first.encode()

    def _final(self, token: bytes, credential: ScramCredential) -> bytes:
        match = parse(CLIENT_FINAL, token, "client final message")
        if match["nonce"] != self._nonce:
            raise SaslExchangeError("Invalid client nonce in the final client message.")
        if base64.b64decode(match["channel"]) != self._gs2.encode():
            raise SaslExchangeError("Invalid channel binding in the final client message.")
        auth_message = f"{self._first_bare},{self._server_first},{match['without_proof']}".encode()
        signature = hmac.new(credential.stored_key, auth_message, self.algorithm).digest()
        proof = base64.b64decode(match["proof"])
        if len(proof) != len(signature):
            raise SaslExchangeError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.algorithm, client_key).digest(), credential.stored_key):
            raise SaslExchangeError("Invalid client credentials")
        server_signature = hmac.new(credential.server_key, auth_message, self.algorithm).digest()
        self._credential = None
        self.complete = True
        return f"v={base64.b64encode(server_signature).decode()}".encode()
