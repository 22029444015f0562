"""What a handler decided to change, as a value: the store writes, and what follows from each of them.

Handlers never write to the store or change the mirrored parts of the context themselves; they compute a
:class:`Plan` from the context (pure decisions: :mod:`.election`, the managers' ``decide`` helpers) and hand it to
the :class:`~odradek.controller.applier.Applier`, which writes and then commits to the context and the request
batch exactly what was written. This is what keeps seed 001's in-memory ``ControllerContext`` (section 2) equal to
the znodes after a refused or fenced write, which Kafka itself only gets by resigning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.controller.context import LeaderIsr, ReplicaAssignment, TopicPartition

__all__ = ["LeaderChange", "Plan"]


class LeaderChange(NamedTuple):
    """A partition state to write (its ``zk_version`` is the one it must replace) and who hears of it."""

    state: LeaderIsr
    recipients: Sequence[int]


@dataclass(slots=True)
class Plan:
    """One step's writes, applied in field order; each part's context updates and requests are committed only
    once its write succeeded.

    Partition states fail per partition (the :class:`~odradek.controller.applier.Applied` says which); every
    other write raises, and nothing of the plan after it is written or committed.
    """

    created: dict[TopicPartition, LeaderChange] = field(default_factory=dict)
    """First states of new partitions (LeaderAndIsr with ``is_new``)."""
    states: dict[TopicPartition, LeaderChange] = field(default_factory=dict)
    """Compare-and-set of existing partition states."""
    assignments: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    """Replica assignments to write into their topics' znodes."""
    reassigning: dict[TopicPartition, tuple[int, ...] | None] = field(default_factory=dict)
    """``being_reassigned`` once the assignments are written: the target, or None when the reassignment ended."""
    reassign_znode: dict[TopicPartition, tuple[int, ...]] | None = None
    """The new content of ``/admin/reassign_partitions`` (empty: delete it); None leaves it alone."""
    left_reassign_znode: set[TopicPartition] = field(default_factory=set)
    """Partitions no longer listed in ``/admin/reassign_partitions`` once it is rewritten."""
    fenced_deletes: list[str] = field(default_factory=list)
    """Znodes to delete under the epoch check (a missing one is fine)."""
    deleted_topics: list[str] = field(default_factory=list)
    """Topics whose znodes go (end of a deletion); the context forgets them after."""
    consumed: list[str] = field(default_factory=list)
    """Request and notification znodes the controller has handled (unfenced deletes, as Kafka does)."""
    metadata: list[TopicPartition] = field(default_factory=list)
    """UpdateMetadata for these partitions to every live broker, once everything above is written."""

    def __bool__(self) -> bool:
        return bool(self.created or self.states or self.assignments or self.reassigning
                    or self.reassign_znode is not None or self.left_reassign_znode or self.fenced_deletes
                    or self.deleted_topics or self.consumed or self.metadata)
