"""An in-memory OffsetsLog, used only to unit-test the coordinator's state machine without a broker."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterator

from odradek.broker.group.schema import GroupKey, OffsetKey, decode_group_value, decode_key, decode_offset_value
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import BatchHeader, Record, decode_batch, iter_batches, stamp


class MemoryOffsetsLog:
    """Partitions as lists of stamped batches. ``fail_with`` makes appends fail; ``gate`` makes them wait."""

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = defaultdict(list)
        self.next_offset: dict[int, int] = defaultdict(int)
        self.fail_with: ErrorCode | None = None
        self.gate: asyncio.Event | None = None

    async def append(self, partition: int, batch: bytearray) -> None:
        headers = [h for _, h in iter_batches(batch)]  # validates structure and CRC as the real log would
        assert len(headers) == 1
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise KafkaError(self.fail_with)
        stamp(batch, 0, self.next_offset[partition], 0)
        self.next_offset[partition] += headers[0].records_count
        self.batches[partition].append(bytes(batch))

    def read(self, partition: int) -> Iterator[tuple[BatchHeader, list[Record]]]:
        for raw in list(self.batches[partition]):
            yield decode_batch(raw)

    def records(self, partition: int) -> list[tuple[OffsetKey | GroupKey, object]]:
        """Every record decoded with the coordinator's own schema: (key, value or None for a tombstone)."""
        out: list[tuple[OffsetKey | GroupKey, object]] = []
        for _, records in self.read(partition):
            for r in records:
                assert r.key is not None
                key = decode_key(r.key)
                if r.value is None:
                    out.append((key, None))
                elif isinstance(key, OffsetKey):
                    out.append((key, decode_offset_value(r.value)))
                else:
                    out.append((key, decode_group_value(r.value)))
        return out
