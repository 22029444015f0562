"""TLS contexts from Kafka's ssl.* settings, driven through a small asyncio TLS server and real TLS clients."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from tls_certs import TestPki

from odradek.broker.config import BrokerConfig
from odradek.security.principal_mapping import PrincipalMapper
from odradek.security.tls import (
    ListenerTls,
    TlsConfigError,
    TlsSettings,
    client_context,
    server_context,
)


@asynccontextmanager
async def tls_echo(ctx: ssl.SSLContext, mapper: PrincipalMapper | None = None) -> AsyncIterator[int]:
    """A server that completes the handshake as the broker does, then answers with the principal and the version."""
    mapper = mapper or PrincipalMapper("DEFAULT")

    listener = ListenerTls(ctx, mapper)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        principal = listener.principal_of(writer, f"{host}:{port}")
        if principal is None:
            return
        version = writer.get_extra_info("ssl_object").version()
        writer.write(f"{principal}|{version}\n".encode())
        await writer.drain()
        writer.close()

    server = await listener.serve(handle, "127.0.0.1", 0, timeout=5)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def ask(port: int, ctx: ssl.SSLContext, server_hostname: str | None = "127.0.0.1") -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname=server_hostname)
    try:
        return (await asyncio.wait_for(reader.readline(), 10)).decode().strip()
    finally:
        writer.close()


def broker_side(pki: TestPki, **extra: object) -> ssl.SSLContext:
    return server_context(TlsSettings.of(keystore_type="PEM", keystore_location=str(pki.broker.keystore),
                                         truststore_type="PEM", truststore_location=str(pki.ca.cert), **extra))


def trusting(pki: TestPki, **extra: object) -> ssl.SSLContext:
    return client_context(TlsSettings.of(truststore_type="PEM", truststore_location=str(pki.ca.cert), **extra))


async def test_pem_key_store_file_and_trust_store_with_the_hostname_check(pki: TestPki) -> None:
    async with tls_echo(broker_side(pki)) as port:
        assert await ask(port, trusting(pki)) == "User:ANONYMOUS|TLSv1.3"
        assert await ask(port, trusting(pki), server_hostname="localhost") == "User:ANONYMOUS|TLSv1.3"
        with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
            await ask(port, trusting(pki), server_hostname="elsewhere.example")
        # an empty ssl.endpoint.identification.algorithm turns the name check off, not the chain check
        lax = trusting(pki, endpoint_identification_algorithm="")
        assert await ask(port, lax, server_hostname="elsewhere.example") == "User:ANONYMOUS|TLSv1.3"
        with pytest.raises(ssl.SSLCertVerificationError):
            await ask(port, client_context(TlsSettings.of(truststore_type="PEM",
                                                          truststore_location=str(pki.alice.cert))))


async def test_inline_pem_key_chain_and_certificates(pki: TestPki) -> None:
    server = server_context(TlsSettings.of(keystore_type="PEM", keystore_key=pki.broker.key_text(),
                                           keystore_certificate_chain=pki.broker.chain_text()))
    client = client_context(TlsSettings.of(truststore_type="PEM", truststore_certificates=pki.ca.cert.read_text()))

    async with tls_echo(server) as port:
        assert await ask(port, client) == "User:ANONYMOUS|TLSv1.3"


async def test_mutual_tls_required_maps_the_certificate_to_the_principal(pki: TestPki) -> None:
    server = broker_side(pki, client_auth="required")
    mapper = PrincipalMapper("RULE:^CN=([^,]*),OU=eng,.*$/$1/,RULE:^CN=([^,]*),.*$/$1-other/U")
    alice = trusting(pki, keystore_type="PEM", keystore_location=str(pki.alice.keystore))
    bob = trusting(pki, keystore_type="PEM", keystore_key=pki.bob.key_text(),
                   keystore_certificate_chain=pki.bob.chain_text(), key_password="bob-secret")

    async with tls_echo(server, mapper) as port:
        assert await ask(port, alice) == "User:alice|TLSv1.3"
        assert await ask(port, bob) == "User:BOB-OTHER|TLSv1.3"
        # no certificate: TLS 1.3 finishes the client's side first; the server's alert then ends it unanswered
        try:
            answer = await ask(port, trusting(pki))
        except (ssl.SSLError, ConnectionError):
            answer = ""
        assert answer == ""


async def test_requested_client_auth_lets_a_client_without_a_certificate_in_as_anonymous(pki: TestPki) -> None:
    server = broker_side(pki, client_auth="requested")
    alice = trusting(pki, keystore_type="PEM", keystore_location=str(pki.alice.keystore))

    async with tls_echo(server) as port:
        assert await ask(port, trusting(pki)) == "User:ANONYMOUS|TLSv1.3"
        assert await ask(port, alice) == "User:CN=alice,OU=eng,O=acme|TLSv1.3"


async def test_enabled_protocols_bound_the_version(pki: TestPki) -> None:
    server = broker_side(pki, enabled_protocols="TLSv1.2")
    only13 = trusting(pki, enabled_protocols="TLSv1.3")

    async with tls_echo(server) as port:
        assert await ask(port, trusting(pki)) == "User:ANONYMOUS|TLSv1.2"
        with pytest.raises((ssl.SSLError, ConnectionError)):  # the server's alert, or its reset first
            await ask(port, only13)


async def test_random_bytes_on_a_tls_port_close_that_connection_with_one_line(
        pki: TestPki, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="odradek.security.tls"):
        async with tls_echo(broker_side(pki)) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(bytes(range(256)) * 4)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the server
            writer.close()
            assert await ask(port, trusting(pki)) == "User:ANONYMOUS|TLSv1.3"  # and it keeps serving

    lines = [r.getMessage() for r in caplog.records if "TLS handshake failed" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("closing connection 127.0.0.1:")


@pytest.mark.parametrize(("settings", "message"), [
    ({"keystore_location": "x.pem"}, "ssl.keystore.type=JKS is not supported"),
    ({"keystore_type": "PEM", "keystore_key": "k"}, "certificate chain is not specified"),
    ({"keystore_type": "PEM", "keystore_certificate_chain": "c"}, "private key is not specified"),
    ({"keystore_type": "PEM", "keystore_key": "k", "keystore_certificate_chain": "c", "keystore_location": "x"},
     "Both SSL key store location and separate private key"),
    ({"keystore_key": "k", "keystore_certificate_chain": "c"}, "only for PEM, but key store type is JKS"),
    ({"keystore_type": "PEM", "keystore_location": "x", "keystore_password": "p"}, "cannot be specified with PEM"),
    ({}, "needs a key store"),
    ({"keystore_type": "PEM", "keystore_location": "/nonexistent.pem"}, "Failed to load PEM SSL keystore"),
    ({"enabled_protocols": "SSLv3"}, "unsupported protocols"),
])
def test_settings_kafka_refuses_are_refused(settings: dict[str, str], message: str) -> None:
    with pytest.raises(TlsConfigError, match=message):
        server_context(TlsSettings.of(**settings))


def test_a_wrong_key_password_or_client_auth_value_is_refused(pki: TestPki) -> None:
    with pytest.raises(TlsConfigError, match="Invalid PEM keystore configs"):
        server_context(TlsSettings.of(keystore_type="PEM", keystore_key=pki.bob.key_text(),
                                      keystore_certificate_chain=pki.bob.chain_text(), key_password="wrong"))
    with pytest.raises(TlsConfigError, match=r"ssl\.client\.auth"):
        broker_side(pki, client_auth="always")
    with pytest.raises(TlsConfigError, match="trust store certs can be specified only for PEM"):
        client_context(TlsSettings.of(truststore_certificates=pki.ca.cert.read_text()))


async def test_a_certificate_no_rule_maps_is_closed_with_one_line(
        pki: TestPki, caplog: pytest.LogCaptureFixture) -> None:
    server = broker_side(pki, client_auth="required")
    only_eng = PrincipalMapper("RULE:^CN=([^,]*),OU=eng,.*$/$1/")
    bob = trusting(pki, keystore_type="PEM", keystore_location=str(pki.bob.keystore), key_password="bob-secret")
    alice = trusting(pki, keystore_type="PEM", keystore_location=str(pki.alice.keystore))

    with caplog.at_level(logging.WARNING, logger="odradek.security.tls"):
        async with tls_echo(server, only_eng) as port:
            try:
                answer = await ask(port, bob)
            except (ssl.SSLError, ConnectionError):
                answer = ""
            assert answer == ""
            assert await ask(port, alice) == "User:alice|TLSv1.3"

    lines = [r.getMessage() for r in caplog.records if "names no principal" in r.getMessage()]
    assert len(lines) == 1 and "No rules apply to CN=bob,OU=ops,O=acme" in lines[0], lines


def test_listener_tls_is_built_from_the_listeners_view_of_the_config(pki: TestPki) -> None:
    config = BrokerConfig.build(overrides={
        "ssl.keystore.type": "PEM", "listener.name.secure.ssl.keystore.location": str(pki.broker.keystore),
        "listener.name.secure.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/U",
    })
    listener = ListenerTls.build(lambda name: config.for_listener("SECURE", name))
    assert listener.mapper.principal("CN=alice,OU=eng,O=acme") == "User:ALICE"
    with pytest.raises(TlsConfigError, match="needs a key store"):
        ListenerTls.build(lambda name: config.for_listener("OTHER", name))


def test_listener_prefixed_settings_win_on_their_listener(pki: TestPki) -> None:
    config = BrokerConfig.build(overrides={
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/nowhere.pem",
        "listener.name.internal.ssl.keystore.location": str(pki.broker.keystore),
        "listener.name.internal.ssl.client.auth": "required",
    })
    settings = TlsSettings.resolve(lambda name: config.for_listener("INTERNAL", name))
    assert settings["ssl.keystore.location"] == str(pki.broker.keystore)
    assert settings["ssl.client.auth"] == "required"
    assert config.for_listener("EXTERNAL", "ssl.keystore.location") == "/nowhere.pem"
    assert server_context(settings).verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ValueError, match="invalid literal"):  # a listener's override is typed as its config
        BrokerConfig.build(overrides={"listener.name.internal.max.connections": "many"})
