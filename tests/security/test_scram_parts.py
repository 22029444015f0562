"""SCRAM's pure parts against RFC 7677's test vector, Kafka's credential format, and the credential store's znode."""

from __future__ import annotations

import base64
import json

import pytest

from odradek.coordination import EmbeddedBackend
from odradek.security.sasl_errors import SaslAuthenticationError, SaslExchangeError
from odradek.security.scram import ScramClient, ScramCredential, ScramFormatError, make_credential, username_of
from odradek.security.scram_server import ScramServer
from odradek.security.scram_store import (
    alter_credentials,
    describe_credentials,
    read_credential,
    sanitize,
    user_config_path,
)

# RFC 7677 section 3
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def _server(credential: ScramCredential | None, mechanism: str = "SCRAM-SHA-256") -> ScramServer:
    async def lookup(_mechanism: str, user: str) -> ScramCredential | None:
        return credential if user == "user" else None

    return ScramServer(mechanism, lookup, server_nonce=lambda: SERVER_NONCE)


async def test_rfc7677_exchange_byte_for_byte() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, SALT)
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", client_nonce=CLIENT_NONCE)
    server = _server(credential)
    assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = await server.evaluate(client.first_message())
    assert server_first == (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                            b"i=4096")
    final = client.final_message(server_first)
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    server_final = await server.evaluate(final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    client.verify_final(server_final)
    assert server.complete and server.authorization_id == "user"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_wrong_password_forged_nonce_and_bad_binding_fail(mechanism: str) -> None:
    credential = make_credential(mechanism, "pencil", 4096)
    for password, tamper in (("wrong", None), ("pencil", "nonce"), ("pencil", "binding")):
        client = ScramClient(mechanism, "user", password)
        server = _server(credential, mechanism)
        final = client.final_message(await server.evaluate(client.first_message()))
        if tamper == "nonce":
            final = final.replace(SERVER_NONCE.encode(), b"forged-nonce-of-an-attacker")
        elif tamper == "binding":
            final = final.replace(b"c=biws", b"c=" + base64.b64encode(b"n,a=user,"))
        with pytest.raises(SaslExchangeError):
            await server.evaluate(final)


async def test_unknown_user_other_authzid_and_garbage() -> None:
    credential = make_credential("SCRAM-SHA-256", "pencil")
    with pytest.raises(SaslExchangeError, match="Invalid user credentials"):
        await _server(credential).evaluate(b"n,,n=nobody,r=abc")
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        await _server(credential).evaluate(b"n,a=admin,n=user,r=abc")
    for garbage in (b"", b"n,,", b"n,,n=user", b"y,,n=user,r=abc", b"p=tls,,n=user,r=abc", b"\xff\xfe",
                    b"n,,n=a=b,r=x"):
        with pytest.raises(SaslExchangeError):
            await _server(credential).evaluate(garbage)
    assert username_of("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ScramFormatError):
        username_of("a=b")


def test_credentials_are_kafkas_strings() -> None:
    credential = make_credential("SCRAM-SHA-512", "secret", 8192, b"0123456789abcdef")
    text = credential.to_string()
    assert text.startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=") and text.endswith(",iterations=8192")
    assert ScramCredential.from_string(text) == credential
    for bad in ("salt=a", "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x", "nonsense",
                "salt=AA==,stored_key=AA==,server_key=AA==,iterations=1,extra=1"):
        with pytest.raises(ScramFormatError):
            ScramCredential.from_string(bad)


async def test_store_keeps_other_keys_and_announces_the_change() -> None:
    backend = EmbeddedBackend()
    session = await backend.session()
    await session.create(user_config_path("alice"), json.dumps(
        {"version": 1, "config": {"producer_byte_rate": "1024"}}).encode(), make_parents=True)
    credential = make_credential("SCRAM-SHA-256", "alice-secret", 8192)
    await alter_credentials(session, "alice", {"SCRAM-SHA-256": credential}, [])
    data, _ = await session.get("/config/users/alice")
    doc = json.loads(data)
    assert doc == {"version": 1, "config": {"producer_byte_rate": "1024",
                                            "SCRAM-SHA-256": credential.to_string()}}
    assert await read_credential(session, "SCRAM-SHA-256", "alice") == credential
    assert await read_credential(session, "SCRAM-SHA-512", "alice") is None
    changes = await session.children("/config/changes")
    note, _ = await session.get(f"/config/changes/{sorted(changes)[-1]}")
    assert json.loads(note) == {"version": 2, "entity_path": "users/alice"}
    await alter_credentials(session, "bob smith*", {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "x")}, [])
    assert sanitize("bob smith*") == "bob%20smith%2A"
    assert await describe_credentials(session, None) == {"alice": {"SCRAM-SHA-256": 8192},
                                                         "bob smith*": {"SCRAM-SHA-512": 4096}}
    await alter_credentials(session, "alice", {}, ["SCRAM-SHA-256"])
    assert json.loads((await session.get("/config/users/alice"))[0])["config"] == {"producer_byte_rate": "1024"}
    await backend.close()

