"""The server side of Kafka's SASL exchange on one connection, as Kafka's SaslServerAuthenticator runs it.

A connection on a SASL listener starts unauthenticated. It may send ApiVersions (once, first) and SaslHandshake
naming a mechanism; any other request then is Kafka's IllegalSaslStateException ("Unexpected Kafka request of type
METADATA during SASL handshake.") and closes the connection with no answer. After a v1 handshake the mechanism's
tokens travel in SaslAuthenticate requests; after a v0 handshake (old clients) they travel raw, each one only
size-prefixed, and so do the server's answers. A mechanism that is not enabled is answered UNSUPPORTED_SASL_MECHANISM
and the connection closed; a failed exchange is answered SASL_AUTHENTICATION_FAILED with Kafka's message and closed,
after ``connection.failed.authentication.delay.ms`` (100 ms: Kafka's brake on password guessing).

Once complete, the principal is ``User:<authorization id>``. With ``connections.max.reauth.ms`` set (KIP-368) the
session lasts that long: SaslAuthenticate v1+ tells the client, which re-authenticates in place (a new handshake with
the same mechanism, then SaslAuthenticate, with the same principal); a connection that sends anything but a
handshake after its session expired is closed. Decisions only: the connection does the reading and writing.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from odradek.errors import ErrorCode
from odradek.security.jaas import parse_one_module
from odradek.security.listeners import listener_setting
from odradek.security.plain import PlainServer
from odradek.security.sasl_errors import SaslAuthenticationError, SaslExchangeError
from odradek.security.scram_server import CredentialLookup, ScramServer

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class MechanismServer(Protocol):
    """One mechanism's server for one exchange (a fresh one per authentication)."""

    complete: bool
    authorization_id: str | None

    async def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next token; raises SaslAuthenticationError or SaslExchangeError."""
        ...


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """What one SASL listener authenticates with."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    reauth_ms: int = 0
    failed_delay_ms: int = 100
    credentials: CredentialLookup | None = None

    def server_for(self, mechanism: str) -> MechanismServer:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        if self.credentials is None:
            raise SaslExchangeError("no SCRAM credential store")
        return ScramServer(mechanism, self.credentials)


def jaas_setting(listener: str, mechanism: str) -> str:
    """Kafka's listener-and-mechanism prefixed JAAS setting name."""
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def enabled_mechanisms(values: Mapping[str, Any], listener: str) -> tuple[str, ...]:
    raw = listener_setting(values, listener, "sasl.enabled.mechanisms") or ""
    return tuple(m.strip().upper() for m in str(raw).split(",") if m.strip())


def sasl_settings(values: Mapping[str, Any], listener: str, credentials: CredentialLookup | None) -> SaslSettings:
    """A SASL listener's settings, refused at start-up where Kafka refuses them (or where odradek lacks the
    mechanism: GSSAPI and OAUTHBEARER are not built)."""
    mechanisms = enabled_mechanisms(values, listener)
    if not mechanisms:
        raise ValueError(f"listener {listener}: sasl.enabled.mechanisms is empty")
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ValueError(f"listener {listener}: SASL mechanism {','.join(unsupported)} is not supported by odradek "
                         f"(set sasl.enabled.mechanisms to some of {','.join(SUPPORTED_MECHANISMS)}; Kafka's "
                         f"default is GSSAPI)")
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        name = jaas_setting(listener, "PLAIN")
        text = values.get(name)
        if not text:
            raise ValueError(f"Could not find a JAAS configuration for listener {listener} and mechanism PLAIN: "
                             f"set {name}")
        users = parse_one_module(str(text), name).users()
    return SaslSettings(
        listener=listener, mechanisms=mechanisms, plain_users=users,
        reauth_ms=int(listener_setting(values, listener, "connections.max.reauth.ms") or 0),
        failed_delay_ms=int(values.get("connection.failed.authentication.delay.ms") or 0),
        credentials=credentials,
    )


def client_credentials(values: Mapping[str, Any], listener: str, mechanism: str) -> tuple[str, str]:
    """The username and password this broker authenticates with on ``listener`` (its JAAS ``username`` and
    ``password`` options, as Kafka's inter-broker client reads them)."""
    name = jaas_setting(listener, mechanism)
    text = values.get(name)
    if not text:
        raise ValueError(f"inter-broker SASL on {listener} with {mechanism}: set {name} with username and password")
    module = parse_one_module(str(text), name)
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise ValueError(f"{name}: the inter-broker client needs username=\"...\" and password=\"...\"")
    return username, password


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake-or-versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    REAUTH_BAD_MECHANISM = "reauth-bad-mechanism"
    FAILED = "failed"


@dataclass(slots=True)
class AuthenticateResult:
    error_code: ErrorCode
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


class SaslConnection:
    """One connection's authentication: the state, the mechanism's server, the principal and the session."""

    def __init__(self, settings: SaslSettings, now_ms: Callable[[], int]) -> None:
        self.settings = settings
        self.now_ms = now_ms
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.raw = False  # v0 handshake: tokens travel without Kafka headers
        self.mechanism: str | None = None
        self.server: MechanismServer | None = None
        self.principal: str | None = None
        self.failure: str | None = None
        """Why authentication failed: set, the connection answers (after the delay) and closes."""
        self.session_expires_ms: int | None = None
        self.supports_reauth = False
        self.reauthentications = 0
        self._reauth_principal: str | None = None
        self._bad_mechanism_message = ""

    @property
    def authenticated(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def reauthenticating(self) -> bool:
        return self._reauth_principal is not None

    def _what(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    def fail(self, reason: str) -> None:
        self.state = State.FAILED
        self.failure = reason

    def refusal(self, api_key: int, api_name: str) -> str | None:
        """Why a request with ``api_key`` may not be served now (None: it may). Sets the failure."""
        state = self.state
        if state is State.COMPLETE:
            return None
        if state is State.HANDSHAKE_OR_VERSIONS and api_key in (API_VERSIONS, SASL_HANDSHAKE):
            return None
        if state is State.HANDSHAKE and api_key == SASL_HANDSHAKE:
            return None
        if state is State.AUTHENTICATE and api_key == SASL_AUTHENTICATE and not self.raw:
            return None
        if state is State.REAUTH_BAD_MECHANISM:
            reason = self._bad_mechanism_message
        elif state is State.AUTHENTICATE:
            reason = f"Unexpected Kafka request of type {api_name} during SASL {self._what()}."
        else:
            reason = f"Unexpected Kafka request of type {api_name} during SASL handshake."
        self.fail(reason)
        return reason

    def api_versions_answered(self) -> None:
        if self.state is State.HANDSHAKE_OR_VERSIONS:
            self.state = State.HANDSHAKE

    def session_expired(self) -> bool:
        return (self.state is State.COMPLETE and self.session_expires_ms is not None
                and self.now_ms() > self.session_expires_ms)

    def handshake(self, mechanism: str, version: int) -> tuple[ErrorCode, tuple[str, ...]]:
        """A SaslHandshake: the error code and the enabled mechanisms to answer with."""
        enabled = self.settings.mechanisms
        if self.state is State.COMPLETE:
            if version < 1 or not self.supports_reauth:
                # no re-authentication for this client: Kafka's KafkaApis answers the handshake, and serves on
                return ErrorCode.illegal_sasl_state, enabled
            self._reauth_principal = self.principal  # KIP-368: a re-authentication begins
        if mechanism not in enabled:
            self.fail(f"Unsupported SASL mechanism {mechanism}")
            return ErrorCode.unsupported_sasl_mechanism, enabled
        if self.reauthenticating and mechanism != self.mechanism:
            self._bad_mechanism_message = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                           f"re-authentication of mechanism '{self.mechanism}'")
            self.state = State.REAUTH_BAD_MECHANISM
            return ErrorCode.none, enabled
        try:
            self.server = self.settings.server_for(mechanism)
        except SaslExchangeError as exc:
            self.fail(str(exc))
            return ErrorCode.unsupported_sasl_mechanism, enabled
        self.mechanism = mechanism
        self.raw = version == 0
        self.state = State.AUTHENTICATE
        return ErrorCode.none, enabled

    async def authenticate(self, token: bytes, version: int) -> AuthenticateResult:
        """A SaslAuthenticate's token (or a raw v0 token): the mechanism's answer, or the failure."""
        if self.state is State.REAUTH_BAD_MECHANISM:
            self.fail(self._bad_mechanism_message)
            return AuthenticateResult(ErrorCode.sasl_authentication_failed, self._bad_mechanism_message, b"", 0)
        server = self.server
        if self.state is not State.AUTHENTICATE or server is None:
            message = f"Unexpected SASL token during SASL {self._what()} (state {self.state.value})"
            self.fail(message)
            return AuthenticateResult(ErrorCode.illegal_sasl_state, message, b"", 0)
        if version > 0:
            self.supports_reauth = True
        try:
            answer = await server.evaluate(token)
            if server.complete:
                principal = f"User:{server.authorization_id}"
                if self._reauth_principal is not None and principal != self._reauth_principal:
                    before, after = (p.replace(":", ".", 1) for p in (self._reauth_principal, principal))
                    raise SaslAuthenticationError(
                        f"Cannot change principals during re-authentication from {before}: {after}")
        except SaslAuthenticationError as exc:
            self.fail(str(exc))
            return AuthenticateResult(ErrorCode.sasl_authentication_failed, str(exc), b"", 0)
        except SaslExchangeError as exc:
            message = (f"Authentication failed during {self._what()} due to invalid credentials with SASL mechanism "
                       f"{self.mechanism}")
            self.fail(f"{message} ({exc})")
            return AuthenticateResult(ErrorCode.sasl_authentication_failed, message, b"", 0)
        lifetime = 0
        if server.complete:
            if self._reauth_principal is not None:
                self.reauthentications += 1
            self.principal = principal
            self._reauth_principal = None
            self.state = State.COMPLETE
            lifetime = max(0, self.settings.reauth_ms)
            self.session_expires_ms = self.now_ms() + lifetime if lifetime > 0 else None
        return AuthenticateResult(ErrorCode.none, None, answer, lifetime)
