"""TLS for listeners and outgoing broker connections, configured with Kafka's ``ssl.*`` names.

Operators bring their Kafka ``server.properties``; the PEM forms of Kafka's stores are the ones Python's ``ssl`` can
read, so those are served (``ssl.keystore.type=PEM`` with ``ssl.keystore.location``, a file holding the private key
and the certificate chain, or ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` inline; ``ssl.key.password``
for an encrypted key; ``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or ``ssl.truststore.certificates``).
Kafka's stores default to JKS: a listener that needs one of another type is refused with a message saying so, as is
every combination Kafka's DefaultSslEngineFactory refuses, with Kafka's wording.

``ssl.client.auth`` is Kafka's: ``required`` (no certificate, no connection), ``requested`` (a certificate is asked
for and verified when sent), ``none``. ``ssl.enabled.protocols`` bounds the versions (OpenSSL takes a range, so the
lowest and highest listed); when empty, ``ssl.protocol`` is the highest. On the client side,
``ssl.endpoint.identification.algorithm=https`` (Kafka's default) checks the server's name or address against its
certificate; an empty value turns the check off. Per-listener overrides (``listener.name.<l>.ssl.*``) are resolved
by :meth:`BrokerConfig.for_listener`, as Kafka resolves them.

The server handshake runs after the connection is accepted (:func:`server_handshake`), not inside asyncio's
``start_server``: the connection limits apply before any TLS work, and a failed handshake (a plaintext client on a
TLS port, random bytes) is one log line naming the peer, where asyncio would close it without a word.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.security.principal_mapping import NoMatchingRule, PrincipalMapper
from odradek.security.x500 import CertificateFormatError, subject_rfc2253

log = logging.getLogger(__name__)

PEM = "PEM"
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
PROTOCOL_CEILING = {"TLS": ssl.TLSVersion.MAXIMUM_SUPPORTED, **PROTOCOLS}
HANDSHAKE_TIMEOUT_S = 10.0
TLS_DEFAULTS: dict[str, tuple[type, Any]] = {
    # Kafka's names and defaults (the broker's config table takes them from here). Kafka's stores default to JKS;
    # odradek reads PEM only and says so when a listener needs a store of another type.
    "ssl.keystore.type": (str, "JKS"),
    "ssl.keystore.location": (str, None),
    "ssl.keystore.password": (str, None),
    "ssl.keystore.key": (str, None),
    "ssl.keystore.certificate.chain": (str, None),
    "ssl.key.password": (str, None),
    "ssl.truststore.type": (str, "JKS"),
    "ssl.truststore.location": (str, None),
    "ssl.truststore.password": (str, None),
    "ssl.truststore.certificates": (str, None),
    "ssl.client.auth": (str, "none"),
    "ssl.protocol": (str, "TLSv1.3"),
    "ssl.enabled.protocols": (str, "TLSv1.2,TLSv1.3"),
    "ssl.endpoint.identification.algorithm": (str, "https"),
    "ssl.principal.mapping.rules": (str, "DEFAULT"),
}
SETTINGS = tuple(name for name in TLS_DEFAULTS if name != "ssl.principal.mapping.rules")


class TlsConfigError(ValueError):
    """The ``ssl.*`` settings cannot make a TLS context (Kafka's InvalidConfigurationException)."""


@dataclass(frozen=True)
class TlsSettings:
    """One side's ``ssl.*`` values, already resolved for its listener."""

    values: dict[str, Any]

    @classmethod
    def resolve(cls, get: Callable[[str], Any]) -> TlsSettings:
        """Read every ``ssl.*`` setting through ``get`` (``lambda n: config.for_listener(listener, n)``)."""
        return cls({name: get(name) for name in SETTINGS})

    @classmethod
    def of(cls, **values: Any) -> TlsSettings:
        """Settings from keyword arguments with Kafka's names dotted as underscores, the rest at Kafka's defaults
        (tests and embedded use)."""
        resolved = {name: TLS_DEFAULTS[name][1] for name in SETTINGS}
        for key, value in values.items():
            name = "ssl." + key.replace("_", ".")
            if name not in resolved:
                raise TypeError(f"unknown TLS setting {name}")
            resolved[name] = value
        return cls(resolved)

    def __getitem__(self, name: str) -> Any:
        """The value, an empty one read as unset (``ssl.keystore.location=`` in a properties file sets nothing)."""
        value = self.values[name]
        return None if value == "" else value


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """The listener's context: its key and certificate chain, and what it asks of clients (``ssl.client.auth``)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, settings)
    if not _load_keystore(ctx, settings):
        raise TlsConfigError("an SSL listener needs a key store: set ssl.keystore.location or ssl.keystore.key "
                             "(with ssl.keystore.type=PEM)")
    auth = str(settings["ssl.client.auth"] or "none").strip().lower()
    if auth not in CLIENT_AUTH:
        raise TlsConfigError(f"Invalid value {settings['ssl.client.auth']} for configuration ssl.client.auth: "
                             "String must be one of: required, requested, none")
    ctx.verify_mode = CLIENT_AUTH[auth]
    if ctx.verify_mode != ssl.CERT_NONE:
        _load_truststore(ctx, settings)
    return ctx


def client_context(settings: TlsSettings) -> ssl.SSLContext:
    """A connecting side's context: trust from the trust store, a key store for mutual TLS when one is set, and the
    name check of ``ssl.endpoint.identification.algorithm``."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(ctx, settings)
    _load_keystore(ctx, settings)
    _load_truststore(ctx, settings)
    algorithm = str(settings["ssl.endpoint.identification.algorithm"] or "").strip()  # empty: no name check
    if algorithm.lower() == "https":
        ctx.check_hostname = True
    elif algorithm == "":
        ctx.check_hostname = False
    else:
        raise TlsConfigError(f"unsupported ssl.endpoint.identification.algorithm {algorithm!r} (https or empty)")
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _set_protocols(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    raw = settings["ssl.enabled.protocols"]
    names = [p.strip() for p in str(raw or "").split(",") if p.strip()]
    if names:
        unknown = [n for n in names if n not in PROTOCOLS]
        if unknown:
            raise TlsConfigError(f"ssl.enabled.protocols: unsupported protocols {unknown} "
                                 f"(known: {', '.join(PROTOCOLS)})")
        versions = [PROTOCOLS[n] for n in names]
        ctx.minimum_version = min(versions)
        ctx.maximum_version = max(versions)
        return
    protocol = str(settings["ssl.protocol"] or "TLS").strip()
    if protocol not in PROTOCOL_CEILING:
        raise TlsConfigError(f"ssl.protocol: unsupported protocol {protocol!r} (known: {', '.join(PROTOCOL_CEILING)})")
    ctx.maximum_version = PROTOCOL_CEILING[protocol]


def _load_keystore(ctx: ssl.SSLContext, settings: TlsSettings) -> bool:
    """Load the key store if one is configured; False when none is. Kafka's checks, in Kafka's order and words."""
    kind = str(settings["ssl.keystore.type"] or "JKS").upper()
    location = settings["ssl.keystore.location"]
    password = settings["ssl.keystore.password"]
    key_password = settings["ssl.key.password"]
    key = settings["ssl.keystore.key"]
    chain = settings["ssl.keystore.certificate.chain"]
    if key is not None:
        if kind != PEM:
            raise TlsConfigError(f"SSL private key can be specified only for PEM, but key store type is {kind}.")
        if chain is None:
            raise TlsConfigError("SSL private key is specified, but certificate chain is not specified.")
        if location is not None:
            raise TlsConfigError("Both SSL key store location and separate private key are specified.")
        if password is not None:
            raise TlsConfigError("SSL key store password cannot be specified with PEM format, "
                                 "only key password may be specified.")
        _load_inline_chain(ctx, str(chain), str(key), key_password)
        return True
    if chain is not None:
        raise TlsConfigError("SSL certificate chain is specified, but private key is not specified")
    if location is None:
        if password is not None:
            raise TlsConfigError("SSL key store is not specified, but key store password is specified.")
        return False
    if kind != PEM:
        raise TlsConfigError(f"ssl.keystore.type={kind} is not supported: odradek reads PEM key stores only "
                             "(ssl.keystore.type=PEM)")
    if password is not None:
        raise TlsConfigError("SSL key store password cannot be specified with PEM format, "
                             "only key password may be specified")
    try:
        ctx.load_cert_chain(str(location), password=key_password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"Failed to load PEM SSL keystore {location}: {exc}") from exc
    return True


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, key_password: str | None) -> None:
    """Python's ssl loads keys from files only: the inline PEM goes through a private file that is removed at once."""
    with tempfile.TemporaryDirectory(prefix="odradek-tls-") as tmp:
        os.chmod(tmp, 0o700)
        path = os.path.join(tmp, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        try:
            ctx.load_cert_chain(path, password=key_password)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"Invalid PEM keystore configs: {exc}") from exc


def _load_truststore(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    kind = str(settings["ssl.truststore.type"] or "JKS").upper()
    location = settings["ssl.truststore.location"]
    password = settings["ssl.truststore.password"]
    certificates = settings["ssl.truststore.certificates"]
    if certificates is not None:
        if kind != PEM:
            raise TlsConfigError("SSL trust store certs can be specified only for PEM, "
                                 f"but trust store type is {kind}.")
        if location is not None:
            raise TlsConfigError("Both SSL trust store location and separate trust certificates are specified.")
        if password is not None:
            raise TlsConfigError("SSL trust store password cannot be specified for PEM format.")
        try:
            ctx.load_verify_locations(cadata=str(certificates))
        except (ValueError, ssl.SSLError) as exc:
            raise TlsConfigError(f"Invalid PEM truststore configs: {exc}") from exc
        return
    if location is None:
        if password is not None:
            raise TlsConfigError("SSL trust store is not specified, but trust store password is specified.")
        ctx.set_default_verify_paths()  # the system's CAs, as Java falls back to its cacerts
        return
    if kind != PEM:
        raise TlsConfigError(f"ssl.truststore.type={kind} is not supported: odradek reads PEM trust stores only "
                             "(ssl.truststore.type=PEM)")
    if password is not None:
        raise TlsConfigError("SSL trust store password cannot be specified for PEM format.")
    try:
        ctx.load_verify_locations(cafile=str(location))
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(f"Failed to load PEM SSL truststore {location}: {exc}") from exc


async def server_handshake(writer: asyncio.StreamWriter, ctx: ssl.SSLContext, peer: str,
                           timeout: float = HANDSHAKE_TIMEOUT_S) -> bool:
    """Upgrade an accepted connection to TLS; False (after one log line and closing it) when the handshake fails."""
    try:
        await writer.start_tls(ctx, ssl_handshake_timeout=timeout)
    except (ssl.SSLError, ConnectionError, TimeoutError, asyncio.IncompleteReadError, OSError) as exc:
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        log.warning("closing connection %s: TLS handshake failed (%s)", peer, reason)
        writer.close()
        return False
    return True


def peer_subject(writer: asyncio.StreamWriter) -> str | None:
    """The client certificate's subject in RFC 2253 form as Java prints it; None without a certificate."""
    ssl_object = writer.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    try:
        return subject_rfc2253(der)
    except CertificateFormatError as exc:
        raise ssl.SSLError(f"client certificate's subject unreadable: {exc}") from exc


@dataclass(frozen=True)
class ListenerTls:
    """What an SSL or SASL_SSL listener needs: its server context and its principal mapping rules."""

    context: ssl.SSLContext
    mapper: PrincipalMapper

    @classmethod
    def build(cls, get: Callable[[str], Any]) -> ListenerTls:
        """From the listener's view of the config (``lambda n: config.for_listener(listener, n)``); TlsConfigError
        or ValueError (a bad mapping rule) when it cannot be served."""
        return cls(server_context(TlsSettings.resolve(get)), PrincipalMapper(get("ssl.principal.mapping.rules")))

    async def accept(self, writer: asyncio.StreamWriter, peer: str,
                     timeout: float = HANDSHAKE_TIMEOUT_S) -> str | None:
        """Run the handshake and name the client: ``User:<mapped subject>`` for a client certificate,
        ``User:ANONYMOUS`` without one; None once the connection is closed (a failed handshake, a certificate no
        rule maps), with one log line."""
        if not await server_handshake(writer, self.context, peer, timeout):
            return None
        try:
            return self.mapper.principal(peer_subject(writer))
        except (NoMatchingRule, ssl.SSLError, ValueError) as exc:
            log.warning("closing connection %s: its certificate names no principal (%s)", peer, exc)
            writer.close()
            return None
