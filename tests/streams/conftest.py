"""Fixtures of the Kafka Streams tests: the ``kafka-streams`` jar bundle, the application compiled against it once
per session (never committed), and a three-broker odradek cluster per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streams_app import JAVA_DIR

from odradek.apache_kafka import KAFKA_4, compile_java, jars
from odradek.testing import ThreadedCluster, start_cluster


@pytest.fixture(scope="session")
def streams_lib() -> Path:
    return jars.ensure_bundle("kafka-streams", jars.streams())


@pytest.fixture(scope="session")
def streams_classes(tmp_path_factory: pytest.TempPathFactory, streams_lib: Path) -> Path:
    out = tmp_path_factory.mktemp("streams-classes")
    return compile_java(KAFKA_4, *sorted(JAVA_DIR.glob("*.java")), out_dir=out, lib=streams_lib)


@pytest.fixture
def streams_cluster(tmp_path: Path) -> Iterator[ThreadedCluster]:
    cluster = start_cluster(tmp_path / "odradek", 3)
    try:
        yield cluster
    finally:
        cluster.close()
