"""SCRAM (RFC 5802, with RFC 7677's SHA-256 and Kafka's SHA-512): credentials, key derivation and the messages.

Kafka stores a user's credential per mechanism as ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``
(ScramCredentialUtils), never the password. ``SaltedPassword = PBKDF2-HMAC(password, salt, iterations)``,
``ClientKey = HMAC(SaltedPassword, "Client Key")``, ``StoredKey = H(ClientKey)``,
``ServerKey = HMAC(SaltedPassword, "Server Key")``. The message grammar is Kafka's ScramMessages: only the ``n``
GS2 header (no channel binding), an optional ``a=`` authorization id, extensions accepted and ignored. Pure
functions and values: the server's exchange is :mod:`odradek.security.scram_server`, the client's (inter-broker
connections) :class:`ScramClient` here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
"""Kafka's ScramMechanism type bytes, as Describe/AlterUserScramCredentials carry them (0 is UNKNOWN)."""
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramFormatError(ValueError):
    """A SCRAM message or stored credential that does not parse."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_string(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        props: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ScramFormatError(f"Credentials not valid: {text}")
            props[key] = value
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ScramFormatError(f"Credentials not valid: {text}")
        try:
            return cls(base64.b64decode(props["salt"], validate=True),
                       base64.b64decode(props["stored_key"], validate=True),
                       base64.b64decode(props["server_key"], validate=True), int(props["iterations"]))
        except (binascii.Error, ValueError):
            raise ScramFormatError(f"Credentials not valid: {text}") from None


def _hmac(algorithm: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, algorithm).digest()


def salted_password(algorithm: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(algorithm, password.encode("utf-8"), salt, iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    """What Kafka stores for ``password`` (a random salt unless given, as ScramFormatter.generateCredential)."""
    algorithm = MECHANISMS[mechanism]
    salt = salt if salt is not None else secrets.token_bytes(32)
    return credential_from_salted(algorithm, salted_password(algorithm, password, salt, iterations), salt, iterations)


def credential_from_salted(algorithm: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    client_key = _hmac(algorithm, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(algorithm, client_key).digest(),
                           _hmac(algorithm, salted, b"Server Key"), iterations)


def sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def username_of(name: str) -> str:
    """RFC 5802's saslname decoding; any other ``=`` is invalid (Kafka's ScramFormatter.username)."""
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramFormatError(f"Invalid username: {name}")
    return name.replace("=2C", ",").replace("=3D", "=")


def nonce() -> str:
    """Printable, comma-free, unguessable."""
    return secrets.token_urlsafe(24)


_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXT = rf"(?:,[A-Za-z]+={_VALUE})*"
CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<name>{_SASLNAME}),"
                          rf"r=(?P<nonce>{_PRINTABLE}){_EXT})")
SERVER_FIRST = re.compile(rf"(?:m={_VALUE},)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_B64}),i=(?P<iterations>[0-9]+)"
                          rf"{_EXT}")
CLIENT_FINAL = re.compile(rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXT}),"
                          rf"p=(?P<proof>{_B64})")
SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE})|v=(?P<signature>{_B64})){_EXT}")


def parse(pattern: re.Pattern[str], message: bytes, what: str) -> re.Match[str]:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramFormatError(f"Invalid SCRAM {what} format: not UTF-8") from None
    match = pattern.fullmatch(text)
    if match is None:
        raise ScramFormatError(f"Invalid SCRAM {what} format: {text[:200]!r}")
    return match


def gs2_header(message: str) -> str:
    """The ``n,[a=...],`` prefix of a client-first message: what client-final's ``c=`` must carry back."""
    first = message.index(",")
    return message[: message.index(",", first + 1) + 1]


class ScramClient:
    """The client side of one exchange (inter-broker connections; the tests' raw exchanges)."""

    def __init__(self, mechanism: str, username: str, password: str, client_nonce: str | None = None) -> None:
        self.algorithm = MECHANISMS[mechanism]
        self.password = password
        self.client_nonce = client_nonce or nonce()
        self.first_bare = f"n={sasl_name(username)},r={self.client_nonce}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        match = parse(SERVER_FIRST, server_first, "server first message")
        combined = match["nonce"]
        if not combined.startswith(self.client_nonce) or combined == self.client_nonce:
            raise ScramFormatError("Invalid server nonce: does not start with client nonce")
        iterations = int(match["iterations"])
        if iterations < MIN_ITERATIONS:
            raise ScramFormatError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS}")
        salt = base64.b64decode(match["salt"])
        salted = salted_password(self.algorithm, self.password, salt, iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={combined}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = _hmac(self.algorithm, salted, b"Client Key")
        stored_key = hashlib.new(self.algorithm, client_key).digest()
        signature = _hmac(self.algorithm, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = _hmac(self.algorithm, _hmac(self.algorithm, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_final(self, server_final: bytes) -> None:
        match = parse(SERVER_FINAL, server_final, "server final message")
        if match["error"]:
            raise ScramFormatError(f"SCRAM authentication failed: {match['error']}")
        if not hmac.compare_digest(base64.b64decode(match["signature"]), self._server_signature):
            raise ScramFormatError("Invalid server signature in server final message")
