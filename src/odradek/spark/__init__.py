"""A pure-Python PySpark source and sink for Kafka-compatible clusters (format ``odradek``).

Usage::

    import odradek.spark
    odradek.spark.register(spark)
    df = spark.read.format("odradek").option("kafka.bootstrap.servers", "host:9092").option("subscribe", "t").load()

Executors import this package too: install it (with the ``spark`` extra) into the Python that
``spark.pyspark.python`` / ``PYSPARK_PYTHON`` names on every node.
"""

from __future__ import annotations

from typing import Any

FORMAT = "odradek"


def register(spark: Any) -> None:
    """Make ``format("odradek")`` available in this SparkSession (readers, streams and writers)."""
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)


__all__ = ["FORMAT", "register"]
