"""Dynamic broker configs (KIP-226) on a real ZooKeeper: Kafka's znodes and notifications, the effects a change has
on a running broker (the log defaults of topics without their own override, message.max.bytes on produce), and a
restart that keeps them. The differential corpus and the tools tests compare the answers with Kafka 3.9's."""

from __future__ import annotations

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

INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CONFIGS = 44, 32


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


def _advertised(bootstrap: str) -> tuple[str, int]:
    """Broker 0's address as Metadata gives it, once it is no longer 127.0.0.1 (the controller sends new metadata
    after the broker re-registers)."""
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))

    def address() -> tuple[str, int] | None:
        broker = admin.list_topics(timeout=10).brokers[0]
        return (broker.host, broker.port) if broker.host != "127.0.0.1" else None

    wait_for(address, 30, what="the new advertised address in Metadata")
    found = address()
    assert found is not None
    return found


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
        assert _advertised(broker.bootstrap) == ("localhost", port)
        assert json.loads(kz.get(f"{root}/brokers/ids/0")[0])["host"] == "localhost"

        broker.stop()
        broker.start()
        admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
        wait_for(lambda: _config(admin, "topic", "plain", "retention.ms").value == "3600000", 30,
                 what="the dynamic default read again after the restart")
        effects_hold()
        assert _advertised(broker.bootstrap)[0] == "localhost"

        # deleted, the static level (here Kafka's defaults) is back
        assert _alter(broker.bootstrap, "0", AlterConfigOpType.DELETE, message_max_bytes="") == (ErrorCode.none, None)
        assert _produce(broker.bootstrap, "plain", 5000) is None
        assert json.loads(kz.get(f"{root}/config/brokers/0")[0]) == {
            "version": 1, "config": {"advertised.listeners": f"PLAINTEXT://localhost:{port}"}}
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
