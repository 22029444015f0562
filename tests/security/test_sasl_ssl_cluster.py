"""The acceptance test of TLS: three ``odradek broker`` processes on a real ZooKeeper with only SASL_SSL listeners,
the inter-broker listener included, SCRAM-SHA-512 everywhere (credentials written to ZooKeeper before the brokers
start, as Kafka's operators do). A topic of replication factor 3 that takes acks=all writes shows the controller's
requests and the followers' fetches went over TLS and authenticated; the clients do the same from outside.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tls_certs import TestPki

from brokers import wait_for
from kafka_clients import opened
from odradek.coordination.localzk import LocalZooKeeper
from odradek.coordination.zookeeper import ZooKeeperBackend
from odradek.security.scram import make_credential
from odradek.security.scram_store import alter_credentials

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(240)]

MECHANISM = "SCRAM-SHA-512"
CHROOT = "/odradek"
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
        'password="broker-secret";')


def overrides(pki: TestPki) -> dict[str, str]:
    return {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": MECHANISM,
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.cert),
        "zookeeper.session.timeout.ms": "6000",
        "replica.lag.time.max.ms": "10000",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.replication.factor": "3",
        "min.insync.replicas": "2",
    }


class ZkBroker:
    def __init__(self, broker_id: int, zookeeper: str, base: Path, settings: dict[str, str]) -> None:
        self.broker_id = broker_id
        self.ready = base / f"broker-{broker_id}.ready"
        self.log_path = base / f"broker-{broker_id}.log"
        cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(broker_id), "--zookeeper", zookeeper,
               "--port", "0", "--data-dir", str(base / f"broker-{broker_id}"), "--ready-file", str(self.ready)]
        for k, v in settings.items():
            cmd += ["--override", f"{k}={v}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def wait_ready(self) -> str:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"broker {self.broker_id} exited: {self.log_path.read_text()[-3000:]}")
            return self.ready.exists() and self.ready.read_text().startswith("bootstrap.servers=")

        wait_for(ready, 90, what=f"broker {self.broker_id} ready")
        return self.ready.read_text().splitlines()[0].split("=", 1)[1]


async def add_users(hosts: str) -> None:
    backend = ZooKeeperBackend(hosts, CHROOT)
    session = await backend.session()
    try:
        for user in ("broker", "alice"):
            await alter_credentials(session, user, {MECHANISM: make_credential(MECHANISM, f"{user}-secret")}, [])
    finally:
        await session.close()


@pytest.fixture
async def sasl_ssl_cluster(tmp_path: Path, pki: TestPki) -> AsyncIterator[str]:
    server = LocalZooKeeper(tmp_path / "zookeeper").start()
    brokers: list[ZkBroker] = []
    try:
        await add_users(server.hosts)
        brokers = [ZkBroker(i, f"{server.hosts}{CHROOT}", tmp_path, overrides(pki)) for i in range(3)]
        yield ",".join(b.wait_ready() for b in brokers)
    finally:
        for b in brokers:
            if b.proc.poll() is None:
                b.proc.send_signal(signal.SIGKILL)
                b.proc.wait(30)
        server.stop()


def test_three_brokers_with_only_sasl_ssl_listeners_work_end_to_end(sasl_ssl_cluster: str, pki: TestPki) -> None:
    client = {"bootstrap.servers": sasl_ssl_cluster, "security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM,
              "sasl.username": "alice", "sasl.password": "alice-secret", "ssl.ca.location": str(pki.ca.cert)}
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    admin = opened(AdminClient(client))
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)

    def fully_replicated() -> bool:
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
        return len(parts) == 3 and all(sorted(p.isrs) == [0, 1, 2] and p.leader >= 0 for p in parts.values())

    wait_for(fully_replicated, 60, interval=0.5, what="three partitions led, each with all three in the ISR")
    producer = opened(Producer({**client, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000}))
    values = [f"v{i}".encode() for i in range(30)]
    for i, v in enumerate(values):
        producer.produce(topic, v, partition=i % 3)
    assert producer.flush(90) == 0
    consumer = opened(Consumer({**client, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 90
    while len(got) < len(values) and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    consumer.close()
    assert sorted(got) == sorted(values)
    # acks=all with min.insync.replicas=2 on RF 3 is only acknowledged once followers fetched over SASL_SSL
    assert fully_replicated()
