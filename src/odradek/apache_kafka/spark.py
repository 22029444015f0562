"""Spark's own Kafka connector (``format("kafka")``) for a SparkSession: the ``spark.jars`` value.

The connector's jars come from the :data:`~odradek.apache_kafka.jars.SPARK_CONNECTOR` bundle. Maven's runtime closure
also holds jars pyspark already ships (scala-library, the Hadoop client, snappy, lz4, slf4j), some at other versions;
those are left out, so Spark's own copies are the only ones on the classpath.
"""

from __future__ import annotations

import re
from importlib import util
from pathlib import Path

from odradek.apache_kafka import jars

__all__ = ["connector_jars", "spark_jars"]

_VERSION_SUFFIX = re.compile(r"-\d[^-]*(-[A-Za-z0-9.]+)?\.jar$")


def _artifact(jar: Path) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``: the name a jar keeps across versions."""
    return _VERSION_SUFFIX.sub("", jar.name)


def _pyspark_jars() -> Path:
    spec = util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise RuntimeError("Spark's Kafka connector needs pyspark (pip install 'odradek[spark]')")
    return Path(spec.origin).parent / "jars"


def connector_jars() -> list[Path]:
    """The connector's jars not already in pyspark's own ``jars/`` directory, fetched with Maven on first use."""
    lib = jars.ensure_bundle(jars.SPARK_CONNECTOR, jars.spark_connector_artifacts())
    shipped = {_artifact(j) for j in _pyspark_jars().glob("*.jar")}
    return sorted(j for j in lib.glob("*.jar") if _artifact(j) not in shipped)


def spark_jars() -> str:
    """The comma-separated ``spark.jars`` value that makes ``format("kafka")`` available to a new SparkSession."""
    return ",".join(str(j) for j in connector_jars())
