"""The secured pair (``secured_scenarios.py``): one Apache Kafka 3.9 broker (ZooKeeper mode) and one odradek broker,
each with a single SASL_PLAINTEXT listener (PLAIN and SCRAM-SHA-256) and the ACL authorizer (``User:admin`` the super
user and the brokers' own login), compared as the one-broker corpus is. Both brokers are started once for the module;
each scenario works on names of its own and its ACLs are deleted after it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from differential_check import Identified, run_both
from differential_corpus import Scenario
from differential_normalise import SelfIds
from differential_runner import Target, run_scenario
from secured_scenarios import SCENARIOS, TEARDOWN, plain_login, scram_user

from brokers import BrokerProcess, wait_for
from odradek.apache_kafka import KAFKA_3, KafkaCluster
from odradek.client import KafkaConnection
from odradek.coordination.localzk import LocalZooKeeper
from odradek.security.client_config import client_security

_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
         'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SETTINGS = {
    "inter.broker.listener.name": "SASL_PLAINTEXT",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": _JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin",
    "group.initial.rebalance.delay.ms": "0",
    "connection.failed.authentication.delay.ms": "0",
}
"""Both brokers alike (the listener's port aside)."""

LOGINS = {"admin": plain_login("admin", "admin-secret"), "alice": plain_login("alice", "alice-secret")}


_ALICE_SCRAM = client_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                                 "sasl.username": "alice", "sasl.password": "alice-secret"})


def _scram_login(bootstrap: str) -> bool:
    try:
        KafkaConnection(bootstrap, security=_ALICE_SCRAM, timeout=10).close()
    except ConnectionError:  # AuthenticationFailed before the credential reaches the broker's cache
        return False
    return True


def _identified(name: str, bootstrap: str) -> Identified:
    """The broker, with alice's SCRAM credential made and usable (Kafka applies it from a ZooKeeper notification)."""
    target = Target.of(name, bootstrap, logins=LOGINS, teardown=TEARDOWN, admin="admin")
    run_scenario(target, Scenario("scram-user", scram_user("alice", "alice-secret")))
    wait_for(lambda: _scram_login(bootstrap), 60, 0.2, what=f"alice's SCRAM login on {name}")
    return target, SelfIds(target.node_id, target.host, target.port)


@pytest.fixture(scope="module")
def kafka_secured(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[Identified]:
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-3.9-secured"), version=KAFKA_3, zookeeper=zookeeper.hosts)
    listener = f"SASL_PLAINTEXT://{cluster.brokers[0].address}"
    cluster.overrides.update(SETTINGS, listeners=listener, **{"advertised.listeners": listener})
    cluster.start()
    try:
        yield _identified("kafka-3.9-secured", cluster.bootstrap_servers)
    finally:
        cluster.kill()


@pytest.fixture(scope="module")
def odradek_secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Identified]:
    base: Path = tmp_path_factory.mktemp("odradek-secured")
    args = ["--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0"]
    for key, value in SETTINGS.items():
        args += ["--override", f"{key}={value}"]
    broker = BrokerProcess(base / "broker", args).start()
    try:
        yield _identified("odradek-secured", broker.bootstrap)
    finally:
        broker.kill()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_secured_scenario(scenario: Scenario, kafka_secured: Identified, odradek_secured: Identified) -> None:
    run_both(scenario, kafka_secured, odradek_secured)
