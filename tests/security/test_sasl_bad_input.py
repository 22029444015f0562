"""Bad input before and during the SASL exchange, and a seeded fuzz of it.

Every case ends with the connection closed (after an error response where Kafka sends one) and one log line; the
broker keeps serving an honest client, and nothing it logs is an unexpected error. The old v0 handshake, whose
tokens travel without Kafka headers, works and fails the same way.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator

import pytest
from security_helpers import PLAIN_JAAS, plain_token, sasl_connection

from brokers import BrokerProcess, wait_for
from odradek.errors import ErrorCode
from odradek.protocol.entities import encode_entity, entity_schemas
from odradek.protocol.wire import request_header
from odradek.security.scram import ScramClient

pytestmark = pytest.mark.timeout(180)
SEED = 14
ROUNDS = 60


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("sasl-bad") / "broker", [
        "--override", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        "--override", "connection.failed.authentication.delay.ms=0",
    ])
    b.start()
    yield b
    assert "unexpected error" not in b.log_text() and "Traceback" not in b.log_text()
    b.stop()


def _honest(broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    assert conn.handshake("PLAIN").error_code == ErrorCode.none
    assert conn.authenticate(plain_token("alice", "alice-secret")).error_code == ErrorCode.none
    assert conn.metadata_brokers()


def _frame(api_key: int, version: int, body: object, flexible: bool) -> bytes:
    payload = request_header(api_key, version, 1, "bad", flexible) + bytes(encode_entity(body))
    return struct.pack(">i", len(payload)) + payload


def test_v0_handshake_exchanges_raw_tokens(broker: BrokerProcess) -> None:
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    assert conn.handshake("PLAIN", version=0).error_code == ErrorCode.none
    assert conn.raw_token(plain_token("alice", "alice-secret")) == b""
    assert conn.metadata_brokers()
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("SCRAM-SHA-256", version=0)
    conn.sock.sendall(struct.pack(">i", 8) + b"n,,n=nob")  # a truncated client-first, raw
    assert conn.closed_by_peer()
    wait_for(lambda: "Invalid SCRAM client first message format" in broker.log_text(), what="the log line")


def test_garbage_before_and_during_the_exchange(broker: BrokerProcess) -> None:
    cases: list[tuple[str, bytes]] = [
        ("random bytes first", struct.pack(">i", 16) + bytes(range(16))),
        ("a negative size", struct.pack(">i", -5)),
        ("a huge size", struct.pack(">i", 2**31 - 1) + b"x"),
        ("produce first", _frame(0, 9, entity_schemas(0, 9).request(transactional_id=None, acks=1,
                                                                       timeout=__import__("datetime").timedelta(0),
                                                                       topic_data=()), True)),
    ]
    for what, data in cases:
        conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
        conn.sock.sendall(data)
        assert conn.closed_by_peer(), what
    # during: after a v1 handshake, a SaslAuthenticate whose body is garbage, and a frame that is not a request
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("PLAIN")
    conn.sock.sendall(struct.pack(">i", 12) + struct.pack(">hhi", 36, 2, 5) + b"\xff\xff\xff\xff")
    assert conn.closed_by_peer()
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.handshake("SCRAM-SHA-256")
    first = conn.authenticate(ScramClient("SCRAM-SHA-256", "alice", "x").first_message())
    assert first.error_code == ErrorCode.sasl_authentication_failed  # no SCRAM credential for alice here
    assert conn.ends_after_refusal()
    conn = sasl_connection(broker.listeners["SASL_PLAINTEXT"])
    conn.sock.sendall(_frame(18, 3, entity_schemas(18, 3).request(client_software_name="x",
                                                                  client_software_version="1"), True))
    conn._frame()
    conn.sock.sendall(_frame(18, 3, entity_schemas(18, 3).request(client_software_name="x",
                                                                  client_software_version="1"), True))
    assert conn.closed_by_peer()  # ApiVersions only once, first, as Kafka allows it
    _honest(broker)


def test_seeded_fuzz_of_the_sasl_exchange(broker: BrokerProcess) -> None:
    rng = random.Random(SEED)
    address = broker.listeners["SASL_PLAINTEXT"]
    for _ in range(ROUNDS):
        junk = rng.randbytes(rng.randint(0, 64))
        stage = rng.choice(["frame", "plain-token", "scram-first", "scram-final", "raw-v0", "handshake-name"])
        conn = sasl_connection(address)
        refused = stage not in ("frame", "raw-v0")  # these end without a response; the others get one
        if stage == "frame":
            conn.sock.sendall(struct.pack(">i", len(junk)) + junk)
        elif stage == "handshake-name":
            answer = conn.handshake(junk.decode("latin-1"))
            assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        elif stage == "raw-v0":
            conn.handshake(rng.choice(["PLAIN", "SCRAM-SHA-256"]), version=0)
            conn.sock.sendall(struct.pack(">i", len(junk)) + junk)
        else:
            mechanism = "PLAIN" if stage == "plain-token" else "SCRAM-SHA-256"
            conn.handshake(mechanism)
            if stage == "scram-final":
                junk = b"c=biws,r=" + junk
            answer = conn.authenticate(junk)
            assert answer.error_code == ErrorCode.sasl_authentication_failed, (stage, junk)
        assert (conn.ends_after_refusal() if refused else conn.closed_by_peer()), (stage, junk)
    _honest(broker)
    log = broker.log_text()
    assert log.count("failed authentication") >= ROUNDS // 2
