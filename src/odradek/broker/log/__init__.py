"""Log storage: Kafka-format segments, indexes, checkpoints, recovery, retention and compaction."""

from odradek.broker.log.manager import LogManager
from odradek.broker.log.partition_log import AppendResult, PartitionLog, ReadResult

__all__ = ["AppendResult", "LogManager", "PartitionLog", "ReadResult"]
