"""A Kafka client properties file (``--command-config``) read into what odradek's clients need.

Kafka's tools take ``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config`` (PlainLoginModule or
ScramLoginModule with ``username`` and ``password``) and the ``ssl.*`` settings. :func:`client_security` turns them
into the :class:`~odradek.security.broker_client.OutgoingSecurity` that odradek's own connections authenticate with
(the same one brokers use towards each other), and :func:`librdkafka_properties` into librdkafka's names for the
tools built on confluent-kafka (librdkafka has no JAAS: it wants ``sasl.username``/``sasl.password``, and reads PEM
files through ``ssl.ca.location``/``ssl.certificate.location``/``ssl.key.location``). librdkafka's own names
(``sasl.username``, ...) are accepted in the file too, as operators moving from kcat write them.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path

from odradek.security.broker_client import PLAINTEXT, OutgoingSecurity
from odradek.security.jaas import JaasError, parse_jaas
from odradek.security.sasl_client import CLIENT_MECHANISMS
from odradek.security.tls import TLS_DEFAULTS, TlsConfigError, TlsSettings, client_context

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
JAVA_ONLY = ("sasl.jaas.config", "ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.location",
             "ssl.keystore.location", "ssl.truststore.certificates", "ssl.keystore.key",
             "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.truststore.password",
             "ssl.keystore.password", "ssl.enabled.protocols", "ssl.protocol", "ssl.client.auth")


class ClientConfigError(ValueError):
    """A client properties file odradek cannot connect with: the message names the property."""


def read_properties(path: Path) -> dict[str, str]:
    """A Java-style properties file: ``name=value`` (or ``name: value``) lines, ``#``/``!`` comments, a trailing
    backslash continuing a line (how long JAAS strings are often written)."""
    out: dict[str, str] = {}
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        pending = ""
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            raise ClientConfigError(f"{path}: expected name=value, got {line!r}")
        out[line[:cut].strip()] = line[cut + 1:].strip()
    return out


def _protocol(props: Mapping[str, str]) -> str:
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError(f"security.protocol={protocol}: expected one of {', '.join(PROTOCOLS)}")
    return protocol


def sasl_credentials(props: Mapping[str, str]) -> tuple[str, str, str]:
    """(mechanism, username, password) from ``sasl.jaas.config`` or librdkafka's ``sasl.username``/``password``."""
    mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI")).upper()
    if mechanism not in CLIENT_MECHANISMS:
        raise ClientConfigError(f"sasl.mechanism={mechanism} is not supported by odradek's tools "
                                f"({', '.join(CLIENT_MECHANISMS)}; Kafka's default is GSSAPI)")
    if "sasl.jaas.config" in props:
        try:
            modules = parse_jaas(props["sasl.jaas.config"])
        except JaasError as exc:
            raise ClientConfigError(f"sasl.jaas.config: {exc}") from None
        options = modules[0].options
        username, password = options.get("username"), options.get("password")
    else:
        username, password = props.get("sasl.username"), props.get("sasl.password")
    if not username or password is None:
        raise ClientConfigError(f"SASL {mechanism} needs a username and password: sasl.jaas.config=... required "
                                f"username=\"...\" password=\"...\";")
    return mechanism, username, password


def client_ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """A client TLS context from Kafka's ``ssl.*`` names, built as brokers build theirs (:mod:`odradek.security.tls`:
    PEM stores only, Kafka's defaults for what the file leaves out)."""
    try:
        return client_context(TlsSettings.resolve(lambda name: props.get(name, TLS_DEFAULTS[name][1])))
    except TlsConfigError as exc:
        raise ClientConfigError(str(exc)) from None


def client_security(props: Mapping[str, str]) -> OutgoingSecurity:
    """How to reach the cluster with these properties (PLAINTEXT when the file sets nothing)."""
    protocol = _protocol(props)
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    ssl_context = client_ssl_context(props) if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL"):
        return OutgoingSecurity("", protocol, ssl_context=ssl_context)
    mechanism, username, password = sasl_credentials(props)
    return OutgoingSecurity("", protocol, mechanism, username, password, ssl_context)


def librdkafka_properties(props: Mapping[str, str]) -> dict[str, str]:
    """The same client properties in librdkafka's names: JAAS becomes ``sasl.username``/``sasl.password``, PEM
    stores become ``ssl.ca.location``/``ssl.certificate.location``/``ssl.key.location``; anything else passes
    through unchanged (librdkafka refuses names it does not know, which is the error the operator should see)."""
    protocol = _protocol(props)
    out = {k: v for k, v in props.items() if k not in JAVA_ONLY}
    if protocol.startswith("SASL"):
        mechanism, username, password = sasl_credentials(props)
        out.update({"sasl.mechanism": mechanism, "sasl.username": username, "sasl.password": password})
    if protocol.endswith("SSL"):
        if "ssl.truststore.location" in props:
            out["ssl.ca.location"] = props["ssl.truststore.location"]
        if "ssl.truststore.certificates" in props:
            out["ssl.ca.pem"] = props["ssl.truststore.certificates"]
        if "ssl.keystore.location" in props:
            out["ssl.certificate.location"] = props["ssl.keystore.location"]
            out["ssl.key.location"] = props["ssl.keystore.location"]
            if "ssl.key.password" in props:
                out["ssl.key.password"] = props["ssl.key.password"]
        if "ssl.keystore.key" in props:
            out["ssl.key.pem"] = props["ssl.keystore.key"]
        if "ssl.keystore.certificate.chain" in props:
            out["ssl.certificate.pem"] = props["ssl.keystore.certificate.chain"]
        if "ssl.endpoint.identification.algorithm" in props:
            algorithm = props["ssl.endpoint.identification.algorithm"].strip().lower()
            out["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    return out
