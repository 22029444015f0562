"""odradek: a Kafka-compatible, replicated, partitioned commit-log cluster in Python."""

__version__ = "0.1.0"
