"""Producer ids handed out from blocks reserved cluster-wide, as Kafka's ProducerIdManager does.

A block is reserved durably in the coordination store before any id of it is used
(:mod:`odradek.broker.link.producer_id_blocks`), so a restart, even after SIGKILL, and another broker can never hand
out an id twice: a restarted broker simply reserves a fresh block past every earlier one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

BLOCK_SIZE = 1000

# Given a block size, reserve the next block cluster-wide; returns (first id, end exclusive).
BlockAllocator = Callable[[int], Awaitable[tuple[int, int]]]


class ProducerIdManager:
    def __init__(self, allocate: BlockAllocator) -> None:
        self.allocate = allocate
        self._next = 0
        self._block_end = 0  # exclusive

    async def next_id(self) -> int:
        while self._next >= self._block_end:
            start, end = await self.allocate(BLOCK_SIZE)
            if self._next >= self._block_end:  # a concurrent caller may have refilled it while we awaited
                self._next, self._block_end = start, end
        pid = self._next
        self._next += 1
        return pid
