"""A Kafka Connect distributed worker on a three-broker odradek cluster: the storage topics it creates compacted, the
FileStream source and sink moving a file end to end, both RUNNING as the REST API reports them, and a worker killed
with SIGKILL mid-stream that resumes from what it had committed.

FileStream is at-least-once: a killed worker's source task reads the file again from its last committed position,
and its sink task consumes again from its group's last committed offset, so the sink file may repeat lines. The test
asserts the shape that follows, exactly, from what is read after the kill:
- the topic is the lines the killed worker produced, then the file again from a position at or past the last one the
  source was seen to commit (a commit still in flight at the kill may land later) and never past what it produced;
- the sink file is the lines the killed worker wrote, then the topic again from an offset at or past the last one its
  group was seen to commit, and never past what it wrote;
- so nothing is lost or reordered: with repeats removed (first occurrence kept) the sink file equals the source file,
  and the repeats are at most the lines produced, and written, after the last commits before the kill.
"""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from connect_records import records

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.apache_kafka import jars
from odradek.apache_kafka.connect import ConnectWorker

TOPIC = "lines"
LINE = "line-{:06d}\n"
WIDTH = len(LINE.format(0))
FIRST, SECOND = 20000, 5000  # lines before the kill (enough that it comes mid-copy), appended while down
STORAGE = {"config.storage.topic": "connect-configs", "offset.storage.topic": "connect-offsets",
           "status.storage.topic": "connect-status"}


def _lines(start: int, count: int) -> str:
    return "".join(LINE.format(i) for i in range(start, start + count))


def _common_prefix(a: list[str], b: list[str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _committed_source_position(bootstrap: str, connector: str) -> int:
    """The last position the source connector committed to the offset topic (0 when none): its key is
    ``["<connector>", {"filename": ...}]``, its value ``{"position": <bytes read>}``."""
    position = 0
    for key, value in records(bootstrap, STORAGE["offset.storage.topic"]):
        if key is not None and json.loads(key)[0] == connector and value is not None:
            position = json.loads(value)["position"]
    return int(position)


def _rest_position(worker: ConnectWorker) -> int:
    """The source's committed position as ``GET /connectors/file-source/offsets`` (KIP-875) reports it (0 when none);
    the worker reads it from the offset topic."""
    status, answer = worker.rest("GET", "/connectors/file-source/offsets")
    if status != 200 or not answer["offsets"]:
        return 0
    return int(answer["offsets"][0]["offset"]["position"])


def _committed_sink_offset(admin: AdminClient, group: str) -> int:
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, 0)])
    result = admin.list_consumer_group_offsets([request])[group].result(30)
    offset = result.topic_partitions[0].offset
    return max(int(offset), 0)  # -1001 (none committed) reads as the start


def _cleanup_policies(admin: AdminClient) -> dict[str, str] | None:
    """Each storage topic's ``cleanup.policy``; None while a broker answers that it does not know one yet (a broker
    hears of a new topic through UpdateMetadata, after the one that created it: Kafka's brokers too)."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in STORAGE.values()]
    try:
        return {r.name: f.result(30)["cleanup.policy"].value for r, f in admin.describe_configs(resources).items()}
    except KafkaException as error:
        if error.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return None
        raise


def _running(worker: ConnectWorker, name: str) -> bool:
    state, tasks = worker.states(name)
    return state == "RUNNING" and tasks == ["RUNNING"]


def _line_count(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def test_filestream_source_and_sink_survive_a_killed_worker(tmp_path: Path) -> None:
    cluster = BrokerProcess(tmp_path / "odradek", ["--brokers", "3",
                                                   "--override", "group.initial.rebalance.delay.ms=0"])
    cluster.start()
    try:
        bootstrap = cluster.bootstrap
        admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        source_file, sink_file = tmp_path / "source.txt", tmp_path / "sink.txt"
        source_file.write_text(_lines(0, FIRST))
        worker = ConnectWorker(tmp_path / "worker", {
            "bootstrap.servers": bootstrap, "group.id": "connect-cluster",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            **STORAGE,
            "config.storage.replication.factor": 3, "offset.storage.replication.factor": 3,
            "status.storage.replication.factor": 3,
            "offset.flush.interval.ms": 500,
            # a killed worker's members stay in their groups until their sessions expire (the sink task's consumer
            # after 45 s by default): the brokers' minimum, so the restarted worker waits 6 s, not 45
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
            "consumer.session.timeout.ms": 6000, "consumer.heartbeat.interval.ms": 1000,
        })
        worker.start()
        try:
            # the worker created its three storage topics, compacted as Connect requires
            policies = wait_for(lambda: _cleanup_policies(admin), 60, 0.2, "the storage topics' configs")
            assert policies == {t: "compact" for t in STORAGE.values()}
            # Connect's partition counts (the config topic must have one), each partition on all three brokers
            topics = admin.list_topics(timeout=30).topics
            assert {t: len(topics[t].partitions) for t in STORAGE.values()} == {
                "connect-configs": 1, "connect-offsets": 25, "connect-status": 5}
            assert all(len(p.replicas) == 3 for t in STORAGE.values() for p in topics[t].partitions.values())

            worker.put_connector("file-source", {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
                "file": str(source_file), "topic": TOPIC})
            worker.put_connector("file-sink", {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
                "file": str(sink_file), "topics": TOPIC})
            assert set(worker.rest("GET", "/connectors")[1]) == {"file-source", "file-sink"}
            for name in ("file-source", "file-sink"):
                wait_for(lambda n=name: _running(worker, n), 120, 0.5, f"{name} and its task RUNNING")

            # mid-stream: the source and the sink have each committed offsets, and the worker dies without flushing
            # anything more
            wait_for(lambda: _committed_sink_offset(admin, "connect-file-sink") > 0 and _rest_position(worker) > 0,
                     120, 0.1, "the sink's and the source's first committed offsets")
            worker.kill()
            committed_lines = _committed_source_position(bootstrap, "file-source") // WIDTH
            sink_at_kill = _line_count(sink_file)  # written line by line: what the killed worker wrote, exactly
            sink_committed = _committed_sink_offset(admin, "connect-file-sink")
            assert committed_lines > 0 and 0 < sink_committed <= sink_at_kill

            with open(source_file, "a") as f:
                f.write(_lines(FIRST, SECOND))
            worker.start()
            for name in ("file-source", "file-sink"):
                wait_for(lambda n=name: _running(worker, n), 120, 0.5, f"{name} RUNNING after the restart")
            source = source_file.read_text().splitlines()
            wait_for(lambda: sink_file.read_text().endswith(f"{source[-1]}\n"), 180, 0.5, "the last line in the sink")
            topic = [value.decode() for _key, value in records(bootstrap, TOPIC) if value is not None]
            sink = sink_file.read_text().splitlines()

            # the source: what the killed worker produced, then the file again from a position at or past the last
            # one it was seen to commit, and never past what it had produced (nothing skipped)
            produced = _common_prefix(topic, source)
            resumed = produced - (len(topic) - len(source))
            assert topic == source[:produced] + source[resumed:]
            assert committed_lines <= resumed <= produced
            # the sink: what the killed worker wrote, then the topic again from an offset at or past its group's last
            # seen commit, never past what it had written
            resumed = sink_at_kill - (len(sink) - len(topic))
            assert sink == topic[:sink_at_kill] + topic[resumed:]
            assert sink_committed <= resumed <= sink_at_kill
            assert list(dict.fromkeys(sink)) == source
        finally:
            worker.stop()
    finally:
        cluster.stop(timeout=60)


def test_the_connect_bundle_holds_connect_the_file_connectors_mirror_maker_and_a_logging_backend() -> None:
    names = {jar.name for jar in jars.ensure_bundle("connect", jars.BUNDLES["connect"]()).glob("*.jar")}
    for artifact in ("connect-runtime", "connect-file", "connect-mirror", "kafka-clients"):
        assert f"{artifact}-{jars.CONNECT}.jar" in names
    # slf4j-api 1.7 finds only an slf4j 1.x binding: without it Connect would log nothing
    assert "slf4j-api-1.7.36.jar" in names and any(n.startswith("log4j-slf4j-impl-") for n in names)
