"""The controller's recent state changes, kept in a bounded ring for the web console.

Kafka writes every partition and replica state change to ``state-change.log``; an operator greps it after the
fact. The console shows them live instead, so the controller keeps the last few hundred in memory. Recording must
cost next to nothing (a controlled shutdown moves 10,000 leaders in one event), so a record is a tuple of the
objects at hand, formatted only when somebody reads the ring. The ring outlives resignations: a broker that was
controller still shows what it did in its term.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

__all__ = ["CAPACITY", "Transition", "TransitionLog"]

CAPACITY = 2000


@dataclass(frozen=True, slots=True)
class Transition:
    seq: int
    time_ms: int
    controller: int
    epoch: int
    kind: str
    """``Partition``, ``Replica`` or ``Controller``."""
    subject: str
    source: str
    target: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq, "time_ms": self.time_ms, "controller": self.controller, "epoch": self.epoch,
            "kind": self.kind, "subject": self.subject, "from": self.source, "to": self.target,
            "detail": self.detail,
        }


class TransitionLog:
    def __init__(self, controller_id: int, capacity: int = CAPACITY) -> None:
        self.controller_id = controller_id
        self._ring: deque[tuple[Any, ...]] = deque(maxlen=capacity)
        self._seq = 0

    def record(self, time_ms: int, epoch: int, kind: str, subject: Any, source: Any, target: Any,
               detail: Any = None) -> None:
        """``subject``, ``source``, ``target`` and ``detail`` are kept as given and turned into text on read."""
        self._seq += 1
        self._ring.append((self._seq, time_ms, epoch, kind, subject, source, target, detail))

    def __len__(self) -> int:
        return len(self._ring)

    def recent(self, limit: int | None = None, internal: bool = True) -> list[Transition]:
        """Oldest first; the last ``limit`` only when given; without ``internal``, none of the internal topics'
        (``__consumer_offsets`` has 50 partitions of 3 replicas: a broker's death would push everything else out)."""
        entries = list(self._ring)
        if not internal:
            entries = [e for e in entries if not str(getattr(e[4], "topic", "")).startswith("__")]
        if limit is not None:
            entries = entries[-limit:]
        return [
            Transition(seq, time_ms, self.controller_id, epoch, kind, _text(subject), _text(source), _text(target),
                       _detail(detail))
            for seq, time_ms, epoch, kind, subject, source, target, detail in entries
        ]


def _text(value: Any) -> str:
    if hasattr(value, "value") and isinstance(value.value, str):  # a PartitionState / ReplicaState
        return str(value.value)
    if hasattr(value, "topic") and hasattr(value, "partition"):
        replica = getattr(value, "replica", None)
        name = f"{value.topic}-{value.partition}"
        return name if replica is None else f"{name} replica {replica}"
    return "" if value is None else str(value)


def _detail(detail: Any) -> str:
    if detail is None:
        return ""
    if hasattr(detail, "leader") and hasattr(detail, "isr"):  # a LeaderIsr
        return f"leader {detail.leader}, leader epoch {detail.leader_epoch}, ISR {list(detail.isr)}"
    return str(detail)
