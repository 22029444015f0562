"""Fixtures of the Java client checks: the programs compiled once per client version, one odradek broker for
the session, and a runner per (client version, cluster) that runs each program once and remembers its lines.

The Kafka 3.9 broker is this suite's own (``tests/apache_kafka_brokers.py`` says why), the 4.x one the session's
(``tests/conftest.py``); the control cluster and odradek both have one broker, so topics have one replica on
either side.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apache_kafka_brokers import kafka_39
from java_clients.programs import Lines, run_program, sources, without_prefix
from odradek.apache_kafka import KAFKA_3, KAFKA_4, KafkaCluster, compile_java
from odradek.coordination.localzk import LocalZooKeeper
from odradek.testing import ThreadedCluster, start_cluster

CLIENTS = [KAFKA_3, KAFKA_4]
"""The client versions every check runs with."""


@pytest.fixture(scope="session")
def apache_kafka_39(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[KafkaCluster]:
    """A Kafka 3.9 broker of this suite's own, not the session's shared one (see ``tests/apache_kafka_brokers.py``)."""
    with kafka_39(tmp_path_factory.mktemp("kafka-3.9-java-clients"), zookeeper) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``classes(version)``: every program compiled against that version's jars, once per session (javac is slow)."""
    compiled: dict[str, Path] = {}

    def classes(version: str) -> Path:
        if version not in compiled:
            out = tmp_path_factory.mktemp(f"java-classes-{version}")
            compiled[version] = compile_java(version, *sources(), out_dir=out)
        return compiled[version]

    return classes


@pytest.fixture(scope="session")
def odradek_java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    """One odradek broker for every Java check of the session, each check on topics and groups of its own."""
    cluster = start_cluster(tmp_path_factory.mktemp("odradek-java"), 1)
    try:
        yield cluster
    finally:
        cluster.close()


_run_ids = itertools.count()


class ProgramRuns:
    """Each program run once per (client version, cluster, arguments); later asks get the remembered lines."""

    def __init__(self, classes: Callable[[str], Path]) -> None:
        self.classes = classes
        self.done: dict[tuple[str, str, str, tuple[str, ...]], tuple[str, Lines]] = {}

    def run(self, version: str, bootstrap: str, program: str, *args: str) -> tuple[str, Lines]:
        """(the topic prefix the run used, its lines); the prefix is unique to the run."""
        key = (version, bootstrap, program, args)
        if key not in self.done:
            prefix = f"j{next(_run_ids)}x{version.replace('.', '')}"
            self.done[key] = (prefix, run_program(version, self.classes(version), program, bootstrap, prefix, *args))
        return self.done[key]

    def compared(self, version: str, ours: str, theirs: str, program: str, *args: str) -> tuple[Lines, Lines]:
        """The lines of ``program`` against odradek (``ours``) and Apache Kafka (``theirs``), each run's names
        replaced by one placeholder so the two compare."""
        ours_prefix, ours_lines = self.run(version, ours, program, *args)
        theirs_prefix, theirs_lines = self.run(version, theirs, program, *args)
        return without_prefix(ours_lines, ours_prefix), without_prefix(theirs_lines, theirs_prefix)


@pytest.fixture(scope="session")
def runs(java_classes: Callable[[str], Path]) -> ProgramRuns:
    return ProgramRuns(java_classes)
