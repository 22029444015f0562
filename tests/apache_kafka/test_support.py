"""The Apache Kafka test support itself: the jar cache, both brokers serving a real client, ApiVersions, Kafka's tools
and Java programs compiled at test time, and a three-broker 3.9 cluster electing a controller and serving an RF 3
topic through a leader's crash."""

from __future__ import annotations

import json
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from brokers import wait_for
from kafka_clients import opened
from odradek.apache_kafka import KAFKA_3, KAFKA_4, KafkaCluster, compile_java, jars, run_java, run_tool
from odradek.coordination.localzk import LocalZooKeeper

CLUSTERS = ["apache_kafka_39", "apache_kafka_4"]


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create_topic(bootstrap: str, topic: str, partitions: int = 1, replication: int = 1) -> None:
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(60)
    del admin
    wait_for(lambda: _partitions(bootstrap, topic), timeout=60, what=f"metadata of {topic}")


def _partitions(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, isr) as the cluster's metadata says, empty while the topic has no leaders."""
    meta = opened(AdminClient({"bootstrap.servers": bootstrap})).list_topics(topic, timeout=20).topics[topic]
    if meta.error is not None or not meta.partitions:
        return {}
    result = {p: (m.leader, sorted(m.isrs)) for p, m in meta.partitions.items()}
    return result if all(leader >= 0 for leader, _ in result.values()) else {}


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    errors: list[object] = []
    producer = opened(Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True}))
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(60) == 0
    assert errors == []


def _consume(bootstrap: str, topic: str, count: int, group: str = "") -> list[bytes]:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": group or f"group-{topic}",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            got.append(msg.value())
    finally:
        consumer.close()
    return got


def _api_versions_v0(port: int) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 on a raw socket, encoded by hand: api key -> (min, max) version, after a zero error code."""
    client_id = b"odradek-test"
    request = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = sock.recv(65536)
            assert chunk, "the broker closed the connection"
            buf += chunk
    correlation_id, error_code, count = struct.unpack_from(">ihi", buf, 4)
    assert (correlation_id, error_code) == (7, 0)
    entries = [struct.unpack_from(">hhh", buf, 14 + 6 * i) for i in range(count)]
    return {key: (low, high) for key, low, high in entries}


@pytest.mark.parametrize("version", [KAFKA_3, KAFKA_4])
def test_jar_cache_holds_the_broker_tools_clients_and_a_logging_backend(version: str) -> None:
    lib = jars.ensure(version)
    names = {p.name for p in lib.glob("*.jar")}
    for artifact in ("kafka_2.13", "kafka-tools", "kafka-clients"):
        assert f"{artifact}-{version}.jar" in names
    backend = {"slf4j-reload4j", "reload4j"} if version.startswith("3.") else {"log4j-core", "log4j-slf4j-impl"}
    assert backend <= {name.rsplit("-", 1)[0] for name in names}
    assert jars.ensure(version) == lib  # the second call reuses the cache


@pytest.mark.parametrize("fixture", CLUSTERS)
def test_broker_serves_a_real_client(fixture: str, request: pytest.FixtureRequest) -> None:
    cluster: KafkaCluster = request.getfixturevalue(fixture)
    topic = _topic("support")
    _create_topic(cluster.bootstrap_servers, topic)
    values = [f"value-{i}".encode() for i in range(20)]
    _produce(cluster.bootstrap_servers, topic, values)
    assert _consume(cluster.bootstrap_servers, topic, len(values)) == values
    assert any(p.name.startswith(topic) for p in cluster.brokers[0].log_dir.iterdir())


@pytest.mark.parametrize("fixture", CLUSTERS)
def test_api_versions_answers(fixture: str, request: pytest.FixtureRequest) -> None:
    cluster: KafkaCluster = request.getfixturevalue(fixture)
    versions = _api_versions_v0(cluster.brokers[0].port)
    for key in (0, 1, 3, 18):  # Produce, Fetch, Metadata, ApiVersions
        low, high = versions[key]
        assert 0 <= low <= high  # 4.x no longer serves the oldest versions (KIP-896)
    tool = "kafka.admin.BrokerApiVersionsCommand" if cluster.version.startswith("3.") else \
        "org.apache.kafka.tools.BrokerApiVersionsCommand"
    result = run_tool(cluster.version, tool, "--bootstrap-server", cluster.bootstrap_servers)
    assert result.returncode == 0, result.stderr
    assert f"{cluster.brokers[0].address} (id: 1 rack: null" in result.stdout  # 4.x adds "isFenced: false"
    assert f"ApiVersions(18): {versions[18][0]} to {versions[18][1]} [usable: " in result.stdout


ADMIN_PROGRAM = """
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;

public class DescribeCluster {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            DescribeClusterResult cluster = admin.describeCluster();
            System.out.println("nodes=" + cluster.nodes().get().size());
            System.out.println("controller=" + cluster.controller().get().id());
        }
    }
}
"""


@pytest.mark.parametrize("fixture", CLUSTERS)
def test_java_program_compiled_at_test_time(fixture: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    cluster: KafkaCluster = request.getfixturevalue(fixture)
    source = tmp_path / "DescribeCluster.java"
    source.write_text(ADMIN_PROGRAM)
    classes = compile_java(cluster.version, source, out_dir=tmp_path / "classes")
    result = run_java(cluster.version, classes, "DescribeCluster", cluster.bootstrap_servers)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["nodes=1", "controller=1"]


# ------------------------------------------------------------------------------------------- three brokers


@pytest.fixture(scope="module")
def kafka_39_trio(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka-3.9-trio"), version=KAFKA_3, brokers=3,
                           zookeeper=zookeeper.hosts).start()
    try:
        yield cluster
    finally:
        cluster.kill()


def test_three_brokers_elect_a_controller_and_serve_an_rf3_topic(kafka_39_trio: KafkaCluster) -> None:
    cluster = kafka_39_trio
    bootstrap = cluster.bootstrap_servers
    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=30)
    try:
        data, _ = wait_for(lambda: zk.exists("/controller") and zk.get("/controller"), timeout=60, what="/controller")
        controller = json.loads(data)["brokerid"]
        assert sorted(int(i) for i in zk.get_children("/brokers/ids")) == [1, 2, 3]
    finally:
        zk.stop()
        zk.close()
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))  # held: a collected client cancels its futures
    described = admin.describe_cluster().result(30)
    assert described.controller.id == controller
    assert sorted(node.id for node in described.nodes) == [1, 2, 3]

    topic = _topic("rf3")
    _create_topic(bootstrap, topic, partitions=3, replication=3)
    wait_for(lambda: all(isr == [1, 2, 3] for _, isr in _partitions(bootstrap, topic).values()), timeout=60,
             what="every replica in sync")
    first = [f"before-{i}".encode() for i in range(30)]
    _produce(bootstrap, topic, first)
    # Consumed while all three run: the first group creates __consumer_offsets, which needs three live brokers
    # (offsets.topic.replication.factor=3), as in Kafka.
    assert sorted(_consume(bootstrap, topic, 30)) == sorted(first)

    leader, _ = _partitions(bootstrap, topic)[0]
    victim = cluster.broker(leader)
    victim.kill()
    survivors = ",".join(b.address for b in cluster.brokers if b is not victim)
    wait_for(lambda: (p := _partitions(survivors, topic)) and p[0][0] != leader and leader not in p[0][1],
             timeout=90, what="a new leader without the killed broker in the ISR")
    second = [f"after-{i}".encode() for i in range(30)]
    _produce(survivors, topic, second)
    assert sorted(_consume(survivors, topic, 60, group=f"after-{topic}")) == sorted(first + second)

    victim.start()
    wait_for(lambda: all(isr == [1, 2, 3] for _, isr in _partitions(bootstrap, topic).values()), timeout=120,
             what="the restarted broker back in every ISR")


def test_brokers_join_a_given_chroot_with_given_ids(tmp_path: Path) -> None:
    """What a mixed cluster needs: Kafka brokers with chosen ids on the chroot odradek brokers already use."""
    cluster = KafkaCluster(tmp_path, version=KAFKA_3, zookeeper="127.0.0.1:2181", chroot="/shared",
                           broker_ids=[4, 7])
    assert [b.node_id for b in cluster.brokers] == [4, 7]
    assert cluster.zookeeper_connect == "127.0.0.1:2181/shared"
    with pytest.raises(ValueError, match="absolute"):
        KafkaCluster(tmp_path, version=KAFKA_3, zookeeper="127.0.0.1:2181", chroot="shared")


def test_cluster_ids_never_start_with_a_dash() -> None:
    """``kafka-storage format -t -xyz`` takes the id for an option; Kafka's ``Uuid.randomUuid`` redraws such ids, and
    so must the KRaft clusters started here (one in 64 ids starts with ``-``)."""
    from odradek.apache_kafka.cluster import random_cluster_id

    ids = [random_cluster_id() for _ in range(5000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
