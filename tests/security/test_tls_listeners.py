"""SSL listeners with real clients: kcat produces and consumes over TLS, confluent-kafka with mutual TLS is named by
its certificate, and random bytes on the TLS port close that connection with one log line while the broker serves on.
"""

from __future__ import annotations

import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from tls_certs import TestPki

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.testing import ThreadedCluster

pytestmark = pytest.mark.timeout(180)

KCAT = "/usr/bin/kcat"


def ssl_overrides(pki: TestPki, **extra: str) -> dict[str, str]:
    return {
        "listeners": "SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.cert),
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }


def as_args(overrides: dict[str, str]) -> list[str]:
    return [arg for k, v in overrides.items() for arg in ("--override", f"{k}={v}")]


def kcat(pki: TestPki, bootstrap: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    cmd = [KCAT, "-b", bootstrap, "-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki.ca.cert}", *args]
    return subprocess.run(cmd, input=stdin, capture_output=True, timeout=60, check=False)


@pytest.mark.skipif(not Path(KCAT).exists(), reason="kcat is not installed")
def test_kcat_produces_and_consumes_over_ssl_and_random_bytes_close_one_connection(
        pki: TestPki, broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory(*as_args(ssl_overrides(pki)))
    topic = f"tls-{uuid.uuid4().hex[:8]}"
    lines = [f"line-{i}" for i in range(10)]
    produced = kcat(pki, broker.bootstrap, "-P", "-t", topic, stdin=("\n".join(lines) + "\n").encode())
    assert produced.returncode == 0, produced.stderr.decode()

    def consumed() -> list[str]:
        out = kcat(pki, broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
        return out.stdout.decode().split()

    assert wait_for(lambda: consumed() == lines, 60, interval=0.5, what="kcat reading the ten lines back")

    # random bytes where a TLS ClientHello should be: that connection alone closes, with one line
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        local_host, local_port = sock.getsockname()[:2]
        local = f"{local_host}:{local_port}"
        sock.sendall(bytes(range(256)) * 8)
        sock.settimeout(10)
        try:
            while sock.recv(1024):  # an alert may come before the close
                pass
        except ConnectionResetError:
            pass
    failed = wait_for(lambda: [ln for ln in broker.log_text().splitlines()
                               if "TLS handshake failed" in ln and local in ln], 10, what="the handshake's log line")
    assert len(failed) == 1, failed
    again = kcat(pki, broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert again.stdout.decode().split() == lines
    assert kcat(pki, broker.bootstrap, "-L", "-J").returncode == 0


def test_mutual_tls_names_the_client_by_its_certificate(pki: TestPki, tmp_path: Path) -> None:
    overrides = ssl_overrides(pki, **{"ssl.client.auth": "required",
                                      "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),OU=eng,.*$/$1/L,DEFAULT"})
    cluster = ThreadedCluster(1, tmp_path, overrides=overrides)
    try:
        cluster.start()
        bootstrap = cluster.call(_bootstrap(cluster))
        alice = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca.cert),
                 "ssl.certificate.location": str(pki.alice.cert), "ssl.key.location": str(pki.alice.key)}
        topic = f"mtls-{uuid.uuid4().hex[:8]}"
        producer = opened(Producer({**alice, "acks": "all"}))
        for i in range(5):
            producer.produce(topic, f"m{i}".encode())
        assert producer.flush(30) == 0
        principals = cluster.run(lambda: sorted({c.principal for c in cluster.cluster.brokers[0]._live}))
        assert "User:alice" in principals, principals
        # the broker reaches itself (its controller) with its own certificate, named by the DEFAULT rule
        assert "User:CN=localhost,O=acme" in principals, principals

        consumer = opened(Consumer({**alice, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}))
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        consumer.close()
        assert got == [f"m{i}".encode() for i in range(5)]

        # no client certificate: the handshake fails (ssl.client.auth=required) and the client says so
        errors: list[KafkaError] = []
        anonymous = opened(Producer({"bootstrap.servers": bootstrap, "security.protocol": "SSL",
                                     "ssl.ca.location": str(pki.ca.cert), "error_cb": errors.append}))
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            anonymous.poll(0.2)
        assert errors and errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
    finally:
        cluster.close()


async def _bootstrap(cluster: ThreadedCluster) -> str:
    return cluster.cluster.bootstrap_on("SSL")
