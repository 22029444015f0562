"""Brokers talk to each other through the inter-broker listener and authenticate there.

A three-broker cluster whose inter-broker listener is SASL_PLAINTEXT (PLAIN, and SCRAM-SHA-512 with the brokers'
credentials written to the store before they start, as Kafka's operators do with ``kafka-configs --zookeeper``):
the controller's requests and the followers' fetches can only travel over it, so a replicated topic that
acknowledges acks=all writes shows they authenticated. A broker given a wrong inter-broker password is refused
with Kafka's message and its connection closed.
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from security_helpers import PLAIN_JAAS

from brokers import wait_for
from kafka_clients import opened
from odradek.security.broker_client import AuthenticationFailed, OutgoingSecurity, open_broker_connection
from odradek.security.scram import make_credential
from odradek.security.scram_store import alter_credentials
from odradek.testing import FAST_TEST_OVERRIDES, ThreadedCluster

pytestmark = pytest.mark.timeout(180)

SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
              'password="broker-secret";')


def _overrides(mechanism: str) -> dict[str, str]:
    return {
        **FAST_TEST_OVERRIDES,
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": mechanism,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "2",
    }


def _replicates(cluster: ThreadedCluster) -> None:
    bootstrap = cluster.call(_bootstrap_on(cluster, "PLAINTEXT"))
    topic = f"rep-{uuid.uuid4().hex[:8]}"
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(30)
    producer = opened(Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000}))
    for i in range(20):
        producer.produce(topic, f"v{i}".encode(), partition=i % 2)
    assert producer.flush(60) == 0
    wait_for(lambda: _full_isr(cluster, topic), 30, what="every broker in the ISR of both partitions")
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                                "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got = set()
    deadline = time.monotonic() + 60
    while len(got) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.add(msg.value())
    consumer.close()
    assert got == {f"v{i}".encode() for i in range(20)}


async def _bootstrap_on(cluster: ThreadedCluster, listener: str) -> str:
    return cluster.cluster.bootstrap_on(listener)


def _full_isr(cluster: ThreadedCluster, topic: str) -> bool:
    def check() -> bool:
        brokers = cluster.cluster.brokers.values()
        return all(topic in b.metadata.topics and all(sorted(p.isr) == [0, 1, 2]
                                                     for p in b.metadata.topics[topic].partitions.values())
                   for b in brokers)

    return cluster.run(check)


def test_three_brokers_replicate_over_a_sasl_plain_inter_broker_listener(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    # sessions last 1.5 s: the brokers' own connections (fetchers, controller channels) re-authenticate in place
    cluster = ThreadedCluster(3, tmp_path, overrides={**_overrides("PLAIN"), "connections.max.reauth.ms": "1500"})
    try:
        with caplog.at_level(logging.INFO, logger="odradek.broker.connection"):
            cluster.start()
            outgoing = cluster.run(lambda: cluster.cluster.brokers[0].outgoing)
            assert (outgoing.listener, outgoing.mechanism, outgoing.username) == ("SASL_PLAINTEXT", "PLAIN", "admin")
            _replicates(cluster)
            wait_for(lambda: "re-authenticated as User:admin" in caplog.text, 30, what="a broker re-authenticating")
            _replicates(cluster)
        assert "expired and it did not re-authenticate" not in caplog.text
    finally:
        cluster.close()


def test_three_brokers_replicate_over_scram_with_credentials_made_before_start(tmp_path: Path) -> None:
    cluster = ThreadedCluster(3, tmp_path, overrides=_overrides("SCRAM-SHA-512"))
    try:
        async def add_broker_user() -> None:
            session = await cluster.cluster.backend.session()
            await alter_credentials(session, "broker", {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512",
                                                                                          "broker-secret")}, [])
            await session.close()

        cluster.call(add_broker_user())
        cluster.start()
        _replicates(cluster)

        # a wrong password on the same listener is refused with the server's message, and nothing is left open
        async def wrong_password() -> str:
            host, port = cluster.cluster.brokers[1].advertised["SASL_PLAINTEXT"]
            security = OutgoingSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT", "SCRAM-SHA-512", "broker", "nope")
            try:
                await open_broker_connection(host, port, "test", security, timeout=10)
            except AuthenticationFailed as exc:
                return str(exc)
            return "authenticated"

        message = cluster.call(wrong_password())
        assert "Authentication failed during authentication due to invalid credentials" in message
    finally:
        cluster.close()


def test_outgoing_security_needs_the_listeners_jaas_credentials() -> None:
    from odradek.broker.config import BrokerConfig
    from odradek.security.listeners import listener_config

    overrides = {k: v for k, v in _overrides("SCRAM-SHA-256").items() if k in _overrides("PLAIN")}
    overrides.pop("listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config")
    config = BrokerConfig.build(overrides=overrides)
    with pytest.raises(ValueError, match=r"scram-sha-256\.sasl\.jaas\.config"):
        OutgoingSecurity.from_config(config.values, listener_config(config.values, "127.0.0.1", 0))
    overrides["sasl.mechanism.inter.broker.protocol"] = "GSSAPI"
    config = BrokerConfig.build(overrides=overrides)
    with pytest.raises(ValueError, match="GSSAPI is not supported"):
        OutgoingSecurity.from_config(config.values, listener_config(config.values, "127.0.0.1", 0))
