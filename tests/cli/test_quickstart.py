"""``odradek up`` is the quickstart cluster: Kafka's shipped ``config/server.properties`` values where they differ
from the code defaults, reported by DescribeConfigs with their source, and a new group's first join not delayed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.broker.group.metadata import GroupState
from odradek.clock import ManualClock
from odradek.quickstart import describe_settings, quickstart_settings
from odradek.testing import ThreadedCluster


def _broker_configs(bootstrap: str) -> dict[str, tuple[str | None, ConfigSource]]:
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    future = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "0")])
    [(_resource, result)] = future.items()
    return {name: (entry.value, ConfigSource(entry.source)) for name, entry in result.result(30).items()}


def test_describe_configs_reports_the_quickstart_values_as_set_and_an_override_winning(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", ["--override", "transaction.state.log.min.isr=1",
                                                "--override", "offsets.topic.replication.factor=2"])
    broker.start()
    try:
        configs = _broker_configs(broker.bootstrap)
    finally:
        assert broker.stop() == 0
    quickstart = quickstart_settings(1)
    assert quickstart["group.initial.rebalance.delay.ms"] == "0"
    for name, value in quickstart.items():
        expected = "2" if name == "offsets.topic.replication.factor" else value  # --override wins
        assert configs[name] == (expected, ConfigSource.STATIC_BROKER_CONFIG), name
    assert configs["group.min.session.timeout.ms"] == ("6000", ConfigSource.DEFAULT_CONFIG)  # a code default kept
    started = [line for line in broker.log_text().splitlines() if "broker settings:" in line]
    assert len(started) == 1 and " INFO " in started[0]
    assert "config/server.properties (group.initial.rebalance.delay.ms=0," in started[0]
    assert started[0].endswith("--override offsets.topic.replication.factor=2, transaction.state.log.min.isr=1")


def test_three_brokers_keep_two_in_sync_replicas_for_the_transaction_log() -> None:
    """The file's min.isr of 1 goes with its replication factor of 1; with three replicas the code default stays."""
    assert quickstart_settings(1)["transaction.state.log.min.isr"] == "1"
    assert quickstart_settings(2)["transaction.state.log.min.isr"] == "1"
    three = quickstart_settings(3)
    assert three["transaction.state.log.replication.factor"] == "3"
    assert "transaction.state.log.min.isr" not in three


def test_the_start_up_line_names_overrides_and_hides_secrets() -> None:
    line = describe_settings("Kafka's code defaults", {}, {"num.partitions": "3", "ssl.keystore.password": "s3"})
    assert line == "broker settings: Kafka's code defaults; --override num.partitions=3, ssl.keystore.password=[hidden]"


@pytest.fixture
def frozen_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[ThreadedCluster, ManualClock]]:
    """One broker with ``odradek up``'s settings on a clock that moves only when the test says so: the group
    coordinator's deadlines then fire only if no time has to pass."""
    clock = ManualClock()
    overrides = {**quickstart_settings(1), **request.param}
    cluster = ThreadedCluster(1, tmp_path / "data", overrides=overrides, clock=clock).start()
    try:
        yield cluster, clock
    finally:
        cluster.close()


def _join(cluster: ThreadedCluster) -> tuple[Consumer, str]:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = opened(Producer({"bootstrap.servers": cluster.bootstrap}))
    producer.produce(topic, b"x")
    assert producer.flush(30) == 0
    consumer = opened(Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    return consumer, group


def _group(cluster: ThreadedCluster, group: str) -> tuple[GroupState, int, int | None] | None:
    def read() -> tuple[GroupState, int, int | None] | None:
        found = cluster.cluster.brokers[0].groups.ctx.groups.get(group)
        return None if found is None else (found.state, found.generation_id, found.state_timestamp)

    return cluster.run(read)


def _poll_until_stable(cluster: ThreadedCluster, consumer: Consumer, group: str) -> tuple[GroupState, int, int | None]:
    def stable() -> object:
        consumer.poll(0.1)
        state = _group(cluster, group)
        return state if state is not None and state[0] is GroupState.STABLE else None

    return wait_for(stable, 60, what=f"group {group} stable")  # type: ignore[return-value]


@pytest.mark.parametrize("frozen_cluster", [{}], indirect=True)
def test_a_new_groups_first_join_completes_without_the_initial_delay(
    frozen_cluster: tuple[ThreadedCluster, ManualClock],
) -> None:
    cluster, clock = frozen_cluster
    consumer, group = _join(cluster)
    try:
        _state, generation, since = _poll_until_stable(cluster, consumer, group)
    finally:
        consumer.close()
    # the coordinator's clock never moved, yet generation 1 completed: no delay had to pass
    assert (generation, since) == (1, clock.now_ms())


@pytest.mark.parametrize("frozen_cluster", [{"group.initial.rebalance.delay.ms": "3000"}], indirect=True)
def test_with_kafkas_code_default_the_first_join_waits_for_the_delay(
    frozen_cluster: tuple[ThreadedCluster, ManualClock],
) -> None:
    cluster, clock = frozen_cluster
    consumer, group = _join(cluster)
    try:
        def preparing() -> object:
            consumer.poll(0.1)
            state = _group(cluster, group)
            return state is not None and state[0] is GroupState.PREPARING_REBALANCE

        wait_for(preparing, 60, what=f"group {group} preparing to rebalance")
        start = clock.now_ms()
        cluster.run(clock.advance, 3000)
        _state, generation, since = _poll_until_stable(cluster, consumer, group)
    finally:
        consumer.close()
    assert generation == 1 and since is not None and since >= start + 3000
