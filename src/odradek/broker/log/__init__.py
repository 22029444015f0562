"""Log storage: Kafka-format segments, indexes, checkpoints, recovery, retention and compaction."""

from odradek.broker.log.partition_log import AppendResult, PartitionLog, ReadResult

__all__ = ["AppendResult", "PartitionLog", "ReadResult"]
