"""Apache Kafka 3.9 brokers for the suites that compare odradek with it.

The tools tests share the session's broker (``apache_kafka_39`` in ``tests/conftest.py``) and leave it as they found
it. The differential corpus and the Java clients' checks start one of their own each (their conftests override the
fixture): they list cluster-wide state (every client quota, every SCRAM user, dynamic broker configs, which topics
inherit), and what another suite created on a shared broker would show up in those lists.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from odradek.apache_kafka import KAFKA_3, KafkaCluster
from odradek.coordination.localzk import LocalZooKeeper


@contextlib.contextmanager
def kafka_39(base_dir: Path, zookeeper: LocalZooKeeper) -> Iterator[KafkaCluster]:
    """One Kafka 3.9 broker in ZooKeeper mode, under a chroot of its own on ``zookeeper``; killed on exit."""
    cluster = KafkaCluster(base_dir, version=KAFKA_3, zookeeper=zookeeper.hosts).start()
    try:
        yield cluster
    finally:
        cluster.kill()
