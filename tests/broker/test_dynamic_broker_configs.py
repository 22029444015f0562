"""Dynamic broker configs (KIP-226) on a real ZooKeeper: Kafka's znodes and notifications, the effects a change has
on a running broker (the log defaults of topics without their own override, message.max.bytes on produce), and a
restart that keeps them. The differential corpus and the tools tests compare the answers with Kafka 3.9's."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic
from kazoo.client import KazooClient

from brokers import wait_for
from kafka_clients import opened
from odradek.admin import request_schema
from odradek.client import KafkaConnection
from odradek.coordination.localzk import LocalZooKeeper
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition
from odradek.testing import start_cluster

INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CONFIGS, ALTER_PARTITION_REASSIGNMENTS = 44, 32, 45


class _Broker:
    """One ``odradek broker`` process on the session's ZooKeeper, under a chroot of its own; a restart binds the
    port the first start got (a dynamic ``advertised.listeners`` names it)."""

    def __init__(self, base: Path, zookeeper: str) -> None:
        self.base, self.zookeeper = base, zookeeper
        self.proc: subprocess.Popen[bytes] | None = None
        self.bootstrap = ""
        self.port = 0

    def start(self) -> _Broker:
        ready = self.base / "ready"
        ready.unlink(missing_ok=True)
        with open(self.base / "broker.log", "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "odradek", "broker", "--id", "0", "--zookeeper", self.zookeeper,
                 "--port", str(self.port), "--data-dir", str(self.base / "data"), "--ready-file", str(ready)],
                stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        wait_for(lambda: ready.exists() and ready.read_text().strip(), 60, what="broker ready")
        self.bootstrap = ready.read_text().strip().splitlines()[0].split("=", 1)[1]
        self.port = self.port or int(self.bootstrap.rsplit(":", 1)[1])
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(60)


@pytest.fixture
def chroot(zookeeper: LocalZooKeeper) -> Iterator[tuple[KazooClient, str]]:
    kz = KazooClient(hosts=zookeeper.hosts)
    kz.start()
    try:
        yield kz, f"/kip226-{uuid.uuid4().hex[:8]}"
    finally:
        kz.stop()


def _alter(bootstrap: str, name: str, op: AlterConfigOpType, *, validate_only: bool = False,
           **configs: str) -> tuple[ErrorCode, str | None]:
    """IncrementalAlterConfigs on one BROKER resource ("" is the cluster default, which confluent-kafka's
    ConfigResource cannot name); the resource's error and message. Names are given with ``_`` for ``.``."""
    with KafkaConnection(bootstrap) as conn:
        version, cls, mod = request_schema(conn, INCREMENTAL_ALTER_CONFIGS, 1)
        resource = mod.AlterConfigsResource(resource_type=4, resource_name=name, configs=tuple(
            mod.AlterableConfig(name=k.replace("_", "."), config_operation=op.value, value=v)
            for k, v in configs.items()))
        result = conn.request(INCREMENTAL_ALTER_CONFIGS, cls(resources=(resource,), validate_only=validate_only),
                              version).responses[0]
    return ErrorCode(result.error_code), result.error_message


def _set(bootstrap: str, name: str, **configs: str) -> None:
    assert _alter(bootstrap, name, AlterConfigOpType.SET, **configs) == (ErrorCode.none, None)


def _config(admin: AdminClient, kind: str, name: str, key: str) -> ConfigEntry:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(30)[key]


def _default_config(bootstrap: str) -> dict[str, tuple[str | None, int]]:
    """The cluster default's dynamic configs as DescribeConfigs lists them: value and source by name."""
    with KafkaConnection(bootstrap) as conn:
        version, cls, mod = request_schema(conn, DESCRIBE_CONFIGS, 4)
        resource = mod.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None)
        result = conn.request(DESCRIBE_CONFIGS, cls(resources=(resource,), include_synonyms=False),
                              version).results[0]
    return {c.name: (c.value, c.config_source) for c in result.configs}


def _advertised(bootstrap: str, host: str) -> None:
    """Wait until Metadata gives broker 0 at ``host`` (the controller sends new metadata after the broker
    re-registers)."""
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    wait_for(lambda: admin.list_topics(timeout=10).brokers[0].host == host, 30,
             what=f"broker 0 advertised at {host} in Metadata")


def _produce(bootstrap: str, topic: str, size: int) -> str | None:
    """Produce one record of ``size`` bytes; the error's name, or None when it was appended."""
    errors: list[str | None] = []
    producer = opened(Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 10_000_000,
                                "message.send.max.retries": 0}))
    producer.produce(topic, b"x" * size, on_delivery=lambda err, _msg: errors.append(err and err.name()))
    producer.flush(30)
    return errors[0] if errors else "no delivery report"


@pytest.mark.zookeeper
def test_dynamic_configs_are_kafkas_znodes_take_effect_and_survive_a_restart(
    tmp_path: Path, zookeeper: LocalZooKeeper, chroot: tuple[KazooClient, str]
) -> None:
    kz, root = chroot
    broker = _Broker(tmp_path, f"{zookeeper.hosts}{root}").start()
    try:
        admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
        topics = [NewTopic("plain", 1, 1), NewTopic("own", 1, 1, config={"retention.ms": "1000"})]
        for future in admin.create_topics(topics).values():
            future.result(30)

        _set(broker.bootstrap, "", log_retention_ms="3600000", log_segment_bytes="1048576")
        _set(broker.bootstrap, "0", message_max_bytes="2000")

        # the znodes and notifications exactly as Kafka's AdminZkClient writes them
        assert json.loads(kz.get(f"{root}/config/brokers/<default>")[0]) == {
            "version": 1, "config": {"log.retention.ms": "3600000", "log.segment.bytes": "1048576"}}
        assert json.loads(kz.get(f"{root}/config/brokers/0")[0]) == {
            "version": 1, "config": {"message.max.bytes": "2000"}}
        notes = [json.loads(kz.get(f"{root}/config/changes/{n}")[0])
                 for n in kz.get_children(f"{root}/config/changes")]
        assert {"version": 2, "entity_path": "brokers/<default>"} in notes
        assert {"version": 2, "entity_path": "brokers/0"} in notes

        def effects_hold() -> None:
            retention = _config(admin, "topic", "plain", "retention.ms")
            assert (retention.value, retention.source) == (
                "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
            assert _config(admin, "topic", "own", "retention.ms").value == "1000"  # its override wins
            mmb = _config(admin, "broker", "0", "message.max.bytes")
            assert (mmb.value, mmb.source, mmb.is_read_only) == (
                "2000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
            # the log takes the new message.max.bytes: a record over it is refused, one under it appended
            assert _produce(broker.bootstrap, "plain", 5000) == "MSG_SIZE_TOO_LARGE"
            assert _produce(broker.bootstrap, "plain", 500) is None

        effects_hold()

        # a new advertised address: the broker registers it in place and Metadata names it
        port = int(broker.bootstrap.rsplit(":", 1)[1])
        _set(broker.bootstrap, "0", advertised_listeners=f"PLAINTEXT://localhost:{port}")
        _advertised(broker.bootstrap, "localhost")
        assert json.loads(kz.get(f"{root}/brokers/ids/0")[0])["host"] == "localhost"
        # and back (the restart below then needs no name resolution)
        assert _alter(broker.bootstrap, "0", AlterConfigOpType.DELETE, advertised_listeners="") == (
            ErrorCode.none, None)
        _advertised(broker.bootstrap, "127.0.0.1")

        broker.stop()
        broker.start()
        admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
        wait_for(lambda: _config(admin, "topic", "plain", "retention.ms").value == "3600000", 30,
                 what="the dynamic default read again after the restart")
        effects_hold()

        # deleted, the static level (here Kafka's defaults) is back
        assert _alter(broker.bootstrap, "0", AlterConfigOpType.DELETE, message_max_bytes="") == (ErrorCode.none, None)
        assert _produce(broker.bootstrap, "plain", 5000) is None
        assert json.loads(kz.get(f"{root}/config/brokers/0")[0]) == {"version": 1, "config": {}}
    finally:
        broker.stop()


@pytest.mark.zookeeper
def test_a_refused_change_leaves_nothing_behind(tmp_path: Path, zookeeper: LocalZooKeeper,
                                                chroot: tuple[KazooClient, str]) -> None:
    kz, root = chroot
    broker = _Broker(tmp_path, f"{zookeeper.hosts}{root}").start()
    try:
        bootstrap = broker.bootstrap
        assert _alter(bootstrap, "", AlterConfigOpType.SET, log_cleaner_threads="2",
                      advertised_listeners="PLAINTEXT://x:1") == (
            ErrorCode.invalid_request,
            "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(advertised.listeners)")
        assert kz.exists(f"{root}/config/brokers/<default>") is None
        assert _alter(bootstrap, "0", AlterConfigOpType.SET, validate_only=True, num_io_threads="4") == (
            ErrorCode.none, None)
        assert kz.exists(f"{root}/config/brokers/0") is None, "validate_only writes nothing"
        _set(bootstrap, "", log_cleaner_threads="2")
        assert _default_config(bootstrap) == {
            "log.cleaner.threads": ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)}
    finally:
        broker.stop()


def test_the_reassignment_throttle_holds_back_a_catching_up_replica(tmp_path: Path) -> None:
    """``leader.replication.throttled.rate`` on the leader and ``leader.replication.throttled.replicas`` on the topic,
    as ``kafka-reassign-partitions --throttle`` sets them: a new replica outside the ISR gets no records while the
    leader's throttled bytes run above the rate, and catches up once the rate is deleted. Fetches are 10 kB, so the
    first one (ten 1 kB batches) already puts the 11-second windowed rate (about 1 kB/s) above the 100 B/s bound."""
    cluster = start_cluster(tmp_path / "cluster", 2, overrides={"replica.fetch.max.bytes": "10000"})
    try:
        leader, follower = cluster.cluster.brokers[0], cluster.cluster.brokers[1]
        bootstrap0 = f"{leader.host}:{leader.port}"
        admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
        admin.create_topics([NewTopic("moving", num_partitions=1, replica_assignment=[[0]])])["moving"].result(30)
        producer = opened(Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, "batch.num.messages": 1}))
        for _ in range(100):
            producer.produce("moving", b"x" * 1000, partition=0)
        assert producer.flush(30) == 0
        quota = leader.replicas.leader_quota
        _set(bootstrap0, "0", leader_replication_throttled_rate="100")
        topic = ConfigResource("topic", "moving", incremental_configs=[ConfigEntry(
            "leader.replication.throttled.replicas", "0:0", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([topic])[topic].result(30)
        wait_for(lambda: quota.bound == 100 and quota.is_throttled("moving", 0), 30, what="the throttle applied")

        controller = cluster.cluster.brokers[cluster.wait_for_controller()]
        with KafkaConnection(f"{controller.host}:{controller.port}") as conn:
            version, cls, mod = request_schema(conn, ALTER_PARTITION_REASSIGNMENTS, 0)
            moved = mod.ReassignableTopic(name="moving", partitions=(
                mod.ReassignablePartition(partition_index=0, replicas=(0, 1)),))
            answer = conn.request(ALTER_PARTITION_REASSIGNMENTS,
                                  cls(timeout=datetime.timedelta(seconds=30), topics=(moved,)), version)
        assert answer.error_code == 0 and answer.responses[0].partitions[0].error_code == 0

        wait_for(lambda: quota.withheld > 0, 60, what="a follower fetch held back by the throttle")
        end = leader.replicas.partitions[TopicPartition("moving", 0)].log.log_end_offset
        assert _alter(bootstrap0, "0", AlterConfigOpType.DELETE, leader_replication_throttled_rate="") == (
            ErrorCode.none, None)
        wait_for(lambda: quota.bound is None, 30, what="the throttle removed")

        def caught_up() -> bool:
            part = follower.replicas.partitions.get(TopicPartition("moving", 0))
            return part is not None and part.log.log_end_offset == end

        wait_for(caught_up, 60, what="the new replica caught up once the throttle is gone")
    finally:
        cluster.close()
