"""ACLs on a real ZooKeeper: two ``odradek broker --zookeeper`` processes with the authorizer; an ACL made through
one is stored at Kafka's paths (read back with kazoo, as zkCli would) and enforced by the other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from acl_support import wait_for
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient

from kafka_clients import opened
from odradek.coordination.localzk import LocalZooKeeper

pytestmark = pytest.mark.zookeeper

SETTINGS = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true", "super.users": "User:admin",
    "zookeeper.session.timeout.ms": "4000", "offsets.topic.replication.factor": "1",
}


def _start(broker_id: int, zookeeper: str, base: Path) -> tuple[subprocess.Popen[bytes], str]:
    ready = base / f"broker-{broker_id}.ready"
    cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(broker_id), "--zookeeper", zookeeper, "--port", "0",
           "--data-dir", str(base / f"broker-{broker_id}"), "--ready-file", str(ready)]
    for k, v in SETTINGS.items():
        cmd += ["--override", f"{k}={v}"]
    with open(base / f"broker-{broker_id}.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def up() -> bool:
        if proc.poll() is not None:
            raise AssertionError((base / f"broker-{broker_id}.log").read_text()[-3000:])
        return ready.exists() and bool(ready.read_text().strip())

    wait_for(up, 60)
    # the ready line: "bootstrap.servers=HOST:PORT[ ...]" (lines for extra listeners may follow)
    first = ready.read_text().strip().splitlines()[0]
    return proc, first.split(" ", 1)[0].split("=", 1)[1].split(",")[0]


@pytest.fixture
def zk_brokers(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    server = LocalZooKeeper(tmp_path / "zookeeper").start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        addresses = []
        for broker_id in (1, 2):
            proc, address = _start(broker_id, f"{server.hosts}/acl", tmp_path)
            procs.append(proc)
            addresses.append(address)
        yield server.hosts, addresses
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.stop()


def _produce(bootstrap: str, topic: str) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = opened(Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000}))
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    return outcome[0] if outcome else KafkaError(KafkaError._MSG_TIMED_OUT)


def test_acls_through_zookeeper(zk_brokers: tuple[str, list[str]]) -> None:
    hosts, (first, second) = zk_brokers
    admin = opened(AdminClient({"bootstrap.servers": first}))
    admin.create_topics([NewTopic("zk-closed", 1, 1)])["zk-closed"].result(30)
    wait_for(lambda: _produce(second, "zk-closed") is None, 30)  # open: no ACL at all yet
    acls = [
        # ANONYMOUS (clients and the brokers themselves over PLAINTEXT) keeps the cluster running
        AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                   AclOperation.ALL, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, "zk-", ResourcePatternType.PREFIXED, "User:bob", "*", AclOperation.WRITE,
                   AclPermissionType.ALLOW),
    ]
    for f in admin.create_acls(acls, request_timeout=30).values():
        f.result()

    def refused() -> bool:
        error = _produce(second, "zk-closed")
        return error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    wait_for(refused, 30)  # the prefixed ACL (for bob) now applies to the topic: ANONYMOUS may not write

    zk = KazooClient(hosts=f"{hosts}/acl")
    zk.start(15)
    try:
        data, _ = zk.get("/kafka-acl-extended/prefixed/Topic/zk-")
        assert json.loads(data) == {"version": 1, "acls": [
            {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"}]}
        data, _ = zk.get("/kafka-acl/Cluster/kafka-cluster")
        assert json.loads(data)["acls"][0]["operation"] == "All"
        changes = zk.get_children("/kafka-acl-extended-changes")
        assert changes and all(c.startswith("acl_changes_") for c in changes)
        event = json.loads(zk.get(f"/kafka-acl-extended-changes/{sorted(changes)[-1]}")[0])
        assert event == {"version": 1, "resourceType": "TOPIC", "name": "zk-", "patternType": "PREFIXED"}
        literal = zk.get_children("/kafka-acl-changes")
        assert [zk.get(f"/kafka-acl-changes/{c}")[0] for c in literal] == [b"CLUSTER:kafka-cluster"]
    finally:
        zk.stop()
        zk.close()
