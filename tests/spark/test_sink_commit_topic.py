"""The streaming sink's marker topic is created replicated before anything can auto-create it.

The sink's tasks look the marker topic's leader up before the driver ever writes to it. That look-up is a Metadata
request, and a broker with ``auto.create.topics.enable`` (the default) creates a missing topic from it with
``default.replication.factor`` (1): the marker then lives on one broker, and the query cannot commit while that
broker is down. Here the first read creates it with three replicas and ``min.insync.replicas=2``, and the driver
keeps committing after the marker's leader is killed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from kafka_clients import opened

pytest.importorskip("pyspark")

from odradek.spark.options import parse_sink_options
from odradek.spark.writer import OdradekStreamWriter, SinkCommit, commit_topic, last_committed_batch
from odradek.testing import ThreadedCluster, start_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ThreadedCluster]:
    c = start_cluster(tmp_path, brokers=3, overrides={"default.replication.factor": "1"})
    try:
        yield c
    finally:
        c.close()


def _leader_and_replicas(admin: AdminClient, topic: str) -> tuple[int, list[int]]:
    partition = admin.list_topics(topic=topic, timeout=30).topics[topic].partitions[0]
    return partition.leader, list(partition.replicas)


def test_marker_topic_is_replicated_and_survives_its_leaders_death(cluster: ThreadedCluster) -> None:
    opts = parse_sink_options({"kafka.bootstrap.servers": cluster.bootstrap_servers, "topic": "out"})
    topic = commit_topic(opts, "query-1")
    admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap_servers}))

    assert last_committed_batch(opts, topic) is None  # what a task of the first micro-batch does first
    leader, replicas = _leader_and_replicas(admin, topic)
    assert sorted(replicas) == sorted(cluster.broker_ids)
    (configs,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    assert configs.result(timeout=30)["min.insync.replicas"].value == "2"

    writer = OdradekStreamWriter(opts)
    writer.commit([SinkCommit(10, "query-1")], 0)
    assert last_committed_batch(opts, topic) == 0

    cluster.kill(leader)
    writer.commit([SinkCommit(10, "query-1")], 1)
    assert last_committed_batch(opts, topic) == 1
    new_leader, _ = _leader_and_replicas(admin, topic)
    assert new_leader != leader
