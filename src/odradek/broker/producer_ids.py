"""Producer id allocation in blocks, as Kafka's ProducerIdManager does.

A broker reserves a block of ids durably before handing any of them out, so a restart (even after SIGKILL) can
never give two producers the same id: it simply starts a fresh block past the reserved one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._next = 0
        self._block_end = 0  # exclusive

    def load(self) -> None:
        if self.path.exists():
            reserved = int(json.loads(self.path.read_text())["block_end"])
            self._next = self._block_end = reserved

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._reserve(self._block_end + BLOCK_SIZE)
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
