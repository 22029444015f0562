"""Apache Kafka itself beside odradek: its jars from Maven Central (:mod:`.jars`), its brokers on loopback
(:mod:`.cluster`), its command-line tools and small Java programs compiled at test time (:mod:`.jvm`), Kafka Connect
workers and MirrorMaker 2 (:mod:`.connect`).

This package sits at the top of the layers, beside ``testing.py``: of odradek it imports only the throwaway ZooKeeper
(``odradek.coordination.localzk``), which 3.x brokers run on. ``python -m odradek.apache_kafka`` fetches the jars
and starts clusters by hand (``__main__.py``).
"""

from __future__ import annotations

from odradek.apache_kafka import jars
from odradek.apache_kafka.cluster import KafkaBroker, KafkaCluster, free_port
from odradek.apache_kafka.jvm import compile_java, java_command, run_java, run_tool

__all__ = [
    "KAFKA_3",
    "KAFKA_4",
    "VERSIONS",
    "KafkaBroker",
    "KafkaCluster",
    "compile_java",
    "free_port",
    "jars",
    "java_command",
    "run_java",
    "run_tool",
]

KAFKA_3 = "3.9.2"
"""The last line with ZooKeeper mode, the seeds' own system, and the one odradek's behaviour is compared with."""
KAFKA_4 = "4.4.0"
"""The newest 4.x on Maven Central when this was written (kafka_2.13, kafka-tools and kafka-clients resolve)."""
VERSIONS = (KAFKA_3, KAFKA_4)
