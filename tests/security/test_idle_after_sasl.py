"""connections.max.idle.ms counts from a SASL exchange too: a client that authenticated and then went quiet is closed
like any idle connection (the exchange must not leave the connection marked as handling a request)."""

from __future__ import annotations

from collections.abc import Callable

from security_helpers import PLAIN_JAAS, plain_token, sasl_connection

from brokers import BrokerProcess, wait_for


def test_an_authenticated_connection_that_goes_quiet_is_closed(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(
        "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "inter.broker.listener.name=SASL_PLAINTEXT",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", "sasl.mechanism.inter.broker.protocol=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        "--override", "connections.max.idle.ms=1500",
    )
    conn = sasl_connection(broker.bootstrap)
    assert conn.handshake("PLAIN").error_code == 0
    assert conn.authenticate(plain_token("alice", "alice-secret")).error_code == 0
    conn.sock.settimeout(30)
    wait_for(conn.closed_by_peer, 40, what="the quiet authenticated connection closed")
    assert "idle for" in broker.log_text()
