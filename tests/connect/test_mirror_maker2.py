"""MirrorMaker 2 (dedicated mode, one JVM) between a real Kafka 3.9 broker and odradek, both directions at once: the
topic and its configs mirrored, the group's offsets checkpointed and synced, and the group moved to the other
cluster at the translated offset.

The bound asserted is MirrorMaker 2's own. A checkpoint translates a committed upstream offset ``u`` to one past the
latest offset sync at or below it (exactly ``u`` when the sync is ``u``). MirrorSourceTask writes a sync whenever the
translation of the record it just copied would be ``offset.lag.max`` or more offsets stale, so for a group that had
read everything it was given, the translated offset ``d`` satisfies ``u - offset.lag.max <= d <= u``: nothing is
lost, and the group re-reads at most ``offset.lag.max`` records on the other side. The group moves only once its
translated offset is inside that bound (a test that waited for less would see an older, wider translation), and
records produced after the move, still to the old cluster, reach it through the mirror.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from connect_records import records

from apache_kafka_brokers import kafka_39
from brokers import BrokerProcess, wait_for
from kafka_clients import close_opened, opened
from odradek.apache_kafka.connect import MirrorMaker
from odradek.coordination.localzk import LocalZooKeeper

LAG_MAX = 5  # offset.lag.max: the most records a moved group may read twice
BEFORE, AFTER = 120, 80  # records read on the old cluster before the move, and produced to it after
RETENTION = "123456789"  # a topic config set at creation, mirrored with the topic
SEGMENT_MS = "987654321"  # a topic config altered after mirroring began, synced by MirrorMaker 2


def _checkpoints(bootstrap: str, source_alias: str) -> Iterator[tuple[str, str, int, int, int]]:
    """(group, topic, partition, upstream offset, downstream offset) of every checkpoint MirrorMaker 2 wrote to
    ``<source>.checkpoints.internal``: Kafka's Struct bytes (int16-length strings, int32, int64, a version header)."""
    for key, value in records(bootstrap, f"{source_alias}.checkpoints.internal"):
        assert key is not None and value is not None
        (glen,) = struct.unpack_from(">h", key, 0)
        group = key[2:2 + glen].decode()
        (tlen,) = struct.unpack_from(">h", key, 2 + glen)
        name = key[4 + glen:4 + glen + tlen].decode()
        (partition,) = struct.unpack_from(">i", key, 4 + glen + tlen)
        _version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
        yield group, name, partition, upstream, downstream


_admins: dict[str, AdminClient] = {}


def _admin(bootstrap: str) -> AdminClient:
    """One admin client per cluster for the test's polls (closed with the test's other clients)."""
    if bootstrap not in _admins:
        _admins[bootstrap] = opened(AdminClient({"bootstrap.servers": bootstrap}))
    return _admins[bootstrap]


def _committed(bootstrap: str, group: str, topic: str) -> int:
    admin = _admin(bootstrap)
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    return int(admin.list_consumer_group_offsets([request])[group].result(30).topic_partitions[0].offset)


def _topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = _admin(bootstrap)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return {name: entry.value for name, entry in admin.describe_configs([resource])[resource].result(30).items()}


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    producer = opened(Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True}))
    for i in range(start, start + count):
        producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(30) == 0


def _read(bootstrap: str, group: str, topic: str, until: str, reset: str) -> list[str]:
    """The group's values from its committed offset (or as ``reset`` says without one: ``error`` where there must be
    one, never a silent reset) until ``until`` has been read; committed at the end."""
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": reset,
                                "enable.auto.commit": False}))
    consumer.subscribe([topic])
    values: list[str] = []

    def done() -> bool:
        message = consumer.poll(0.5)
        if message is not None:
            assert not message.error(), message.error()
            values.append(message.value().decode())
        return bool(values) and values[-1] == until

    wait_for(done, 120, 0, f"{group} reading {topic} up to {until}")
    consumer.commit(asynchronous=False)
    consumer.close()
    return values


class Flow:
    """One direction: ``topic`` on the ``source`` cluster (alias ``alias``), mirrored to ``<alias>.<topic>`` on the
    target, and the group ``g-<topic>`` reading it on one side and then the other."""

    def __init__(self, alias: str, source: str, target_alias: str, target: str, topic: str) -> None:
        self.alias, self.source, self.target, self.topic = alias, source, target, topic
        self.remote = f"{alias}.{topic}"  # DefaultReplicationPolicy: the source's alias, a dot, the topic
        self.group = f"g-{topic}"
        self.flow = f"{alias}->{target_alias}"

    def properties(self) -> dict[str, str]:
        """This direction, enabled for its one topic and one group."""
        return {f"{self.flow}.enabled": "true", f"{self.flow}.topics": self.topic, f"{self.flow}.groups": self.group}

    def begin(self) -> list[str]:
        """The topic with a config of its own and ``BEFORE`` records, all read and committed by the group."""
        admin = _admin(self.source)
        admin.create_topics([NewTopic(self.topic, 1, 1, config={"retention.ms": RETENTION})])[self.topic].result(30)
        _produce(self.source, self.topic, 0, BEFORE)
        return _read(self.source, self.group, self.topic, f"{self.topic}-{BEFORE - 1}", "earliest")

    def alter_config(self) -> None:
        admin = _admin(self.source)
        resource = ConfigResource(ConfigResource.Type.TOPIC, self.topic, incremental_configs=[
            ConfigEntry("segment.ms", SEGMENT_MS, incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)

    def translated(self) -> bool:
        """The target group's synced offset has come within MirrorMaker 2's bound."""
        return _committed(self.target, self.group, self.remote) >= BEFORE - LAG_MAX

    def newest_checkpoint(self) -> tuple[str, str, int, int, int] | None:
        checkpoints = [c for c in _checkpoints(self.target, self.alias) if c[0] == self.group]
        return checkpoints[-1] if checkpoints else None

    def move(self, read_before: list[str]) -> None:
        translated = _committed(self.target, self.group, self.remote)
        # MirrorMaker 2 syncs the group's offset from the checkpoint it has made, which may reach its topic a moment
        # later; an earlier checkpoint may hold an older sync's wider translation
        checkpoint = wait_for(lambda: (c := self.newest_checkpoint()) is not None and c[4] >= translated and c, 60,
                              0.2, f"{self.group}'s checkpoint of offset {translated}")
        assert isinstance(checkpoint, tuple) and checkpoint[1:4] == (self.remote, 0, BEFORE)
        assert BEFORE - LAG_MAX <= translated <= checkpoint[4] <= BEFORE
        _produce(self.source, self.topic, BEFORE, AFTER)  # producers stay on the old cluster
        read_after = _read(self.target, self.group, self.remote, f"{self.topic}-{BEFORE + AFTER - 1}", "error")
        # from the translated offset on, every record once, in order; nothing lost, at most LAG_MAX read twice
        assert read_after == [f"{self.topic}-{i}" for i in range(translated, BEFORE + AFTER)]
        assert set(read_before) | set(read_after) == {f"{self.topic}-{i}" for i in range(BEFORE + AFTER)}
        assert len(set(read_before) & set(read_after)) == BEFORE - translated <= LAG_MAX


def test_mirror_maker_2_both_ways_and_a_group_moved_at_the_translated_offsets(
    tmp_path: Path, zookeeper: LocalZooKeeper
) -> None:
    # a Kafka broker of its own: MirrorMaker 2 leaves internal topics and groups on both clusters
    with kafka_39(tmp_path / "kafka", zookeeper) as kafka_cluster:
        odradek = BrokerProcess(tmp_path / "odradek", ["--override", "group.initial.rebalance.delay.ms=0"])
        odradek.start()
        try:
            _mirror_both_ways(tmp_path, kafka_cluster.bootstrap_servers, odradek.bootstrap)
        finally:
            close_opened()  # before the clusters stop, so no client is left retrying them
            odradek.stop(timeout=60)


def _mirror_both_ways(tmp_path: Path, kafka: str, odradek: str) -> None:
    _admins.clear()
    flows = [Flow("kafka", kafka, "odradek", odradek, "to-odradek"),
             Flow("odradek", odradek, "kafka", kafka, "to-kafka")]
    mm2 = MirrorMaker(tmp_path / "mm2", {
        "clusters": "kafka, odradek",
        "kafka.bootstrap.servers": kafka, "odradek.bootstrap.servers": odradek,
        **flows[0].properties(), **flows[1].properties(),
        "replication.factor": 1, "checkpoints.topic.replication.factor": 1, "heartbeats.topic.replication.factor": 1,
        "offset-syncs.topic.replication.factor": 1, "offset.storage.replication.factor": 1,
        "status.storage.replication.factor": 1, "config.storage.replication.factor": 1,
        "emit.checkpoints.enabled": "true", "sync.group.offsets.enabled": "true", "offset.lag.max": LAG_MAX,
        "emit.checkpoints.interval.seconds": 1, "sync.group.offsets.interval.seconds": 1,
        "refresh.topics.interval.seconds": 1, "refresh.groups.interval.seconds": 1,
        "sync.topic.configs.interval.seconds": 1, "emit.heartbeats.interval.seconds": 1,
    })
    try:
        read_before = [f.begin() for f in flows]
        mm2.start()
        for f in flows:
            wait_for(lambda f=f: mm2.check_alive() or f.remote in _admin(f.target).list_topics(timeout=30).topics,
                     180, 0.5, f"{f.remote} mirrored")
            f.alter_config()
        for f in flows:
            wait_for(lambda f=f: mm2.check_alive() or f.translated(), 180, 0.5, f"{f.group}'s offsets translated")
            assert _topic_config(f.target, f.remote)["retention.ms"] == RETENTION
            wait_for(lambda f=f: _topic_config(f.target, f.remote)["segment.ms"] == SEGMENT_MS, 120, 0.5,
                     f"{f.remote}'s altered config synced")
        for f, before in zip(flows, read_before, strict=True):
            f.move(before)
    finally:
        mm2.kill()
