"""The one boundary between the group coordinator and storage: the partitions of ``__consumer_offsets``.

The coordinator never touches files or replicas itself. It hands finished RecordBatches (built with
:func:`odradek.protocol.records.encode_batch`) to an :class:`OffsetsLog` the broker implements, and reads a
partition back through it when it becomes that partition's coordinator. Keeping this a two-method Protocol
lets the state machine be tested against an in-memory log and lets failover (issue 5) move partitions without
the coordinator knowing how replication works.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from odradek.protocol.records import BatchHeader, Record


class OffsetsLog(Protocol):
    """Appends to and reads from the partitions of ``__consumer_offsets`` (cleanup.policy=compact).

    ``append(partition, batch)``
        Append ``batch`` (one whole RecordBatch, baseOffset 0, to be stamped by the log) to ``partition`` as
        its leader and return once it is committed: replicated to the in-sync replicas, i.e. what acks=all
        means for a producer. Raise :class:`odradek.errors.KafkaError` with the code a Produce would have got
        (for example NOT_LEADER_OR_FOLLOWER when this broker no longer leads the partition,
        NOT_ENOUGH_REPLICAS, KAFKA_STORAGE_ERROR); the coordinator maps those to group errors as Kafka does.
        Appends to one partition must take effect in call order. Cancellation of the awaiting task must not
        corrupt the log: the coordinator shields appends and may stop waiting after
        ``offsets.commit.timeout.ms``.

    ``read(partition)``
        Iterate over every batch of ``partition`` from its log start offset to its log end offset, each decoded
        with :func:`odradek.protocol.records.decode_batch`. Kafka's loader reads to the log end, not the high
        watermark: a new leader's whole log is committed once its followers catch up (the leader never truncates
        it), and stopping at a lagging high watermark would lose commits acknowledged by the old leader. Control
        batches may be included (they are skipped). The coordinator calls it from
        :meth:`GroupCoordinator.load_partition` and consumes it lazily, yielding to the event loop between batches.
    """

    async def append(self, partition: int, batch: bytearray) -> None: ...

    def read(self, partition: int) -> Iterator[tuple[BatchHeader, list[Record]]]: ...
