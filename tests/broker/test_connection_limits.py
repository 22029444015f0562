"""Connection limits (max.connections, max.connections.per.ip and its overrides, connections.max.idle.ms) on a real
broker, with raw sockets and real clients.

The floods come from 127.0.0.2 (any 127/8 address is loopback on Linux), so the broker's own connections (its
controller's channel to itself) and the real clients on 127.0.0.1 are not what the per-address limit counts.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.broker.limits import ConnectionQuotas, LimitSettings, idle_expired, parse_per_ip_overrides

FLOOD_FROM = "127.0.0.2"


def api_versions_request(correlation_id: int) -> bytes:
    client_id = b"flood"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def connect(broker: BrokerProcess, source: str = FLOOD_FROM) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
    return sock


def answered(sock: socket.socket, correlation_id: int = 1) -> bool:
    """Whether the broker answers an ApiVersions request on this socket (False: it closed the connection)."""
    try:
        sock.sendall(api_versions_request(correlation_id))
        head = _recv_exactly(sock, 8)
    except (ConnectionError, OSError):
        return False
    if head is None:
        return False
    size, corr = struct.unpack(">ii", head)
    assert corr == correlation_id
    return _recv_exactly(sock, size - 4) is not None


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def produce_and_consume(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    producer = opened(Producer({"bootstrap.servers": bootstrap}))
    for v in values:
        producer.produce(topic, v)
    assert producer.flush(30) == 0
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                                "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(values) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    return got


def test_a_flood_from_one_address_is_cut_at_its_limit_and_others_are_served(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory("--override", "max.connections.per.ip.overrides=127.0.0.2:3",
                            "--override", "group.initial.rebalance.delay.ms=0")
    flood = [connect(broker) for _ in range(20)]
    try:
        served = [s for s in flood if answered(s)]
        assert len(served) == 3
        lines = [ln for ln in broker.log_text().splitlines() if "Rejected connection from 127.0.0.2" in ln]
        assert len(lines) == 17, lines[:3]
        assert "configured maximum of 3 connections" in lines[0]
        # clients from another address are not counted against 127.0.0.2
        assert produce_and_consume(broker.bootstrap, "limits", [b"a", b"b"]) == [b"a", b"b"]
        # a slot freed is a slot to take again
        served[0].close()
        wait_for(lambda: answered(connect(broker)), what="a new connection once one of the three closed")
    finally:
        for s in flood:
            s.close()


def test_the_broker_wide_limit_closes_new_connections_past_it(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory("--override", "max.connections=8")
    flood = [connect(broker) for _ in range(20)]
    try:
        served = sum(answered(s) for s in flood)
        assert 1 <= served <= 8  # the broker's own connections count too, as Kafka's do
        lines = [ln for ln in broker.log_text().splitlines() if "(max.connections)" in ln]
        assert len(lines) == 20 - served
    finally:
        for s in flood:
            s.close()
    wait_for(lambda: answered(connect(broker, "127.0.0.1")), what="a connection once the flood closed")


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory("--override", "connections.max.idle.ms=1500",
                            "--override", "group.initial.rebalance.delay.ms=0")
    idle = connect(broker)
    busy = connect(broker)
    assert answered(idle) and answered(busy)
    idle.settimeout(0.1)
    correlation = 1

    def idle_closed() -> bool:
        nonlocal correlation
        correlation += 1
        assert answered(busy, correlation), "the connection kept busy was closed"
        try:
            return idle.recv(1) == b""
        except TimeoutError:
            return False
        except ConnectionError:
            return True

    wait_for(idle_closed, timeout=30, interval=0.2, what="the idle connection closed")
    assert answered(busy, correlation + 1)
    assert "idle for" in broker.log_text()
    # a real client whose connections were closed for idleness reconnects and carries on
    assert produce_and_consume(broker.bootstrap, "idle", [b"x"]) == [b"x"]
    idle.close()
    busy.close()


def test_per_ip_overrides_parse_as_kafka_parses_them() -> None:
    assert parse_per_ip_overrides("") == {}
    assert parse_per_ip_overrides("127.0.0.1:5, localhost : 7,::1:2") == {"127.0.0.1": 5, "localhost": 7, "::1": 2}
    with pytest.raises(ValueError, match="not a count"):
        parse_per_ip_overrides("127.0.0.1:many")
    with pytest.raises(ValueError, match="not host:count"):
        parse_per_ip_overrides("127.0.0.1")
    with pytest.raises(ValueError, match="invalid addresses"):
        parse_per_ip_overrides("bad host!:3")


def test_quotas_count_by_address_listener_and_in_all() -> None:
    values = {"max.connections": 4, "max.connections.per.ip": 2, "max.connections.per.ip.overrides": "localhost:3",
              "connections.max.idle.ms": 600000, "listener.name.external.max.connections": 1}
    settings = LimitSettings.from_values(values, resolve=lambda h: "127.0.0.1" if h == "localhost" else h)
    quotas = ConnectionQuotas(settings, protected_listener="internal", listeners=3)
    assert [quotas.admit("PLAINTEXT", "127.0.0.1") for _ in range(3)] == [None, None, None]
    assert "maximum of 3 connections" in str(quotas.admit("PLAINTEXT", "127.0.0.1"))
    assert quotas.admit("EXTERNAL", "10.0.0.1") is None
    assert "listener.name.external.max.connections" in str(quotas.admit("EXTERNAL", "10.0.0.2"))
    assert "(max.connections)" in str(quotas.admit("PLAINTEXT", "10.0.0.3"))
    # the inter-broker listener may pass the broker-wide limit when there are other listeners
    assert quotas.admit("INTERNAL", "10.0.0.4") is None
    quotas.release("PLAINTEXT", "127.0.0.1")
    assert quotas.count("127.0.0.1") == 2
    assert quotas.total == 4
    # with one listener, the inter-broker listener has no exemption
    single = ConnectionQuotas(settings, protected_listener="INTERNAL", listeners=1)
    assert [single.admit("INTERNAL", f"10.0.1.{i}") for i in range(4)] == [None] * 4
    assert "(max.connections)" in str(single.admit("INTERNAL", "10.0.1.9"))
    with pytest.raises(ValueError, match="zero only if"):
        LimitSettings.from_values({**values, "max.connections.per.ip": 0, "max.connections.per.ip.overrides": ""})


def test_idle_expiry_skips_busy_connections_and_can_be_disabled() -> None:
    activity = [("a", 0), ("b", None), ("c", 900)]
    assert idle_expired(activity, 1000, 500) == ["a"]
    assert idle_expired(activity, 1000, -1) == []
