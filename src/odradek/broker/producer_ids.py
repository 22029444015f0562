"""Producer id allocation in blocks, as Kafka's ProducerIdManager does.

A broker reserves a block of ids durably before handing any of them out, so a restart (even after SIGKILL) can
never give two producers the same id: it simply starts a fresh block past the reserved one. A standalone broker
reserves in a local file; brokers of a cluster must share one sequence (two brokers handing out the same id would
make their producers' sequence numbers collide on every partition), so there ``allocate`` reserves the block in the
coordination store (``/latest_producer_id_block``, as Kafka's ZooKeeper-era brokers do).
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

BLOCK_SIZE = 1000


# Given a block size, reserve the next block cluster-wide; returns (first id, end exclusive).
BlockAllocator = Callable[[int], Awaitable[tuple[int, int]]]


class ProducerIdManager:
    def __init__(self, path: Path, allocate: BlockAllocator | None = None) -> None:
        self.path = path
        self.allocate = allocate
        self._next = 0
        self._block_end = 0  # exclusive

    def load(self) -> None:
        if self.path.exists():
            reserved = int(json.loads(self.path.read_text())["block_end"])
            self._next = self._block_end = reserved

    async def next_id(self) -> int:
        while self._next >= self._block_end:
            if self.allocate is None:
                self._reserve(self._block_end + BLOCK_SIZE)
                continue
            start, end = await self.allocate(BLOCK_SIZE)
            if self._next >= self._block_end:  # a concurrent caller may have refilled it while we awaited
                self._next, self._block_end = start, end
        pid = self._next
        self._next += 1
        return pid

    def _reserve(self, block_end: int) -> None:
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"version": 1, "block_end": block_end}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._block_end = block_end
