"""How the registry started with the brokers (``odradek up``, ``odradek broker``) reaches them and guards itself.

It connects through the first PLAINTEXT listener when there is one, else through the inter-broker listener with the
broker's own inter-broker credentials and TLS settings (``sasl.mechanism.inter.broker.protocol``, the listener's
JAAS ``username``/``password``, its ``ssl.*``). When that listener is SSL or SASL_SSL the registry serves HTTPS from
the same ``ssl.*`` settings. When any listener is SASL with a SCRAM mechanism enabled, every HTTP request needs
Basic credentials that log in to that listener with SCRAM, as ``odradek schema-registry --basic-auth`` checks them.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.clock import Clock
from odradek.schema_registry.basic_auth import ScramBasicAuth
from odradek.security.broker_client import OutgoingSecurity
from odradek.security.client_config import librdkafka_properties
from odradek.security.listeners import ListenerConfig, listener_setting
from odradek.security.sasl import enabled_mechanisms
from odradek.security.tls import SETTINGS, TlsSettings, client_context, server_context


@dataclass
class RegistrySecurity:
    """What :class:`~odradek.schema_registry.server.SchemaRegistry` takes: where and how to connect, how to serve."""

    bootstrap: str
    client_config: dict[str, str] = field(default_factory=dict)  # librdkafka names, bootstrap left out
    basic_auth: ScramBasicAuth | None = None
    server_tls: ssl.SSLContext | None = None  # HTTPS when set
    forward_tls: ssl.SSLContext | None = None  # what forwarding to the primary trusts


def _tls_settings(values: Mapping[str, Any], listener: str) -> TlsSettings:
    return TlsSettings.resolve(lambda name: listener_setting(values, listener, name))


def _client_properties(values: Mapping[str, Any], listener: str, security: OutgoingSecurity) -> dict[str, str]:
    """The connecting listener's security in Kafka's client names, then in librdkafka's."""
    props = {"security.protocol": security.protocol}
    if security.protocol.endswith("SSL"):
        props.update({name: str(value) for name in SETTINGS
                      if (value := listener_setting(values, listener, name)) not in (None, "")})
    if security.mechanism is not None:
        props.update({"sasl.mechanism": security.mechanism, "sasl.username": security.username,
                      "sasl.password": security.password})
    return librdkafka_properties(props)


def _scram_listener(values: Mapping[str, Any], listeners: ListenerConfig) -> tuple[str, str] | None:
    """The first SASL listener with a SCRAM mechanism enabled, as (name, protocol)."""
    for listener in listeners.listeners:
        if listener.protocol.startswith("SASL") and any(
                m.startswith("SCRAM-") for m in enabled_mechanisms(values, listener.name)):
            return listener.name, listener.protocol
    return None


def registry_security(values: Mapping[str, Any], listeners: ListenerConfig, outgoing: OutgoingSecurity,
                      addresses: Callable[[str], str], clock: Clock) -> RegistrySecurity:
    """The registry's connection, Basic authentication and TLS beside brokers with these settings; ``addresses``
    gives a listener's bootstrap ``host:port`` list. Raises ValueError or TlsConfigError on settings that cannot
    make a TLS context."""
    plaintext = next((listener.name for listener in listeners.listeners if listener.protocol == "PLAINTEXT"), None)
    security = RegistrySecurity(addresses(plaintext)) if plaintext is not None else RegistrySecurity(
        addresses(outgoing.listener), _client_properties(values, outgoing.listener, outgoing))
    if plaintext is None and outgoing.protocol.endswith("SSL"):
        settings = _tls_settings(values, outgoing.listener)
        security.server_tls, security.forward_tls = server_context(settings), client_context(settings)
    scram = _scram_listener(values, listeners)
    if scram is not None:
        name, protocol = scram
        host, _, port = addresses(name).split(",")[0].rpartition(":")
        context = client_context(_tls_settings(values, name)) if protocol == "SASL_SSL" else None
        security.basic_auth = ScramBasicAuth(host, int(port), protocol, clock, context)
    return security
