"""Fixtures for the Spark source/sink tests: one broker and one local[2] SparkSession per test session.

The broker is odradek itself (``python -m odradek up``). ODRADEK_SPARK_BROKER=noida runs the same tests
against the PyPI peer broker noida-db (see ``spark_brokers.py``) as a second opinion. The session carries Spark's
own Kafka connector (``spark.jars``), so ``format("kafka")`` and ``format("odradek")`` share it; the connector's
tests run on a three-broker cluster of their own (``three_brokers``, one per module).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from odradek.testing import ThreadedCluster, start_cluster

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_brokers import Broker, start_broker, stop_broker


@pytest.fixture(scope="session")
def broker() -> Iterator[Broker]:
    b = start_broker()
    try:
        yield b
    finally:
        stop_broker(b)


@pytest.fixture(scope="session")
def spark():
    """One local[2] session for all Spark tests; workers run this venv's Python."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import odradek.spark
    from odradek.apache_kafka.spark import spark_jars

    session = (
        SparkSession.builder.master("local[2]")
        .appName("odradek-spark-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.driver.memory", "1g")
        .config("spark.jars", spark_jars())
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    """Three odradek brokers in this process, for tests that kill a leader midway (one cluster per module)."""
    cluster = start_cluster(tmp_path_factory.mktemp("three-brokers"), 3)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def reader(spark, broker):
    """Make a fresh DataFrameReader pointed at the broker (readers keep options, so one per query)."""
    return lambda: spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap)
