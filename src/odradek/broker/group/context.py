"""What the group coordinator's parts share: the replayed state, ownership, time and the runtime.

The coordinator is split as Kafka splits its group coordinator: the offsets (:mod:`.offsets`, Kafka's
OffsetMetadataManager), classic groups (:mod:`.classic`) and consumer groups (:mod:`.consumer_groups`, both in
Kafka's GroupMetadataManager), online migration between them (:mod:`.migration`), and the runtime that appends
and replays (:mod:`.runtime`). They work on one state, held here: the classic groups (which also hold every
group's committed offsets, KIP-848 groups' included), the KIP-848 groups and the records last committed for them,
which partitions are owned or loading, the deadline heap and the injected clock.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from odradek.broker.group.config import GroupConfig
from odradek.broker.group.consumer_group import ConsumerGroupLogic, TopicsSnapshot
from odradek.broker.group.consumer_records import KEY_VERSIONS, key_version
from odradek.broker.group.metadata import Group
from odradek.broker.group.offsets_log import OffsetsLog
from odradek.broker.group.runtime import CoordinatorRuntime
from odradek.broker.group.schema import partition_for
from odradek.broker.group.timers import Timers
from odradek.clock import Clock
from odradek.errors import ErrorCode


class CoordinatorContext:
    """The shared state of one broker's group coordinator; every part is given this one object."""

    def __init__(self, clock: Clock, offsets_log: OffsetsLog, config: GroupConfig) -> None:
        self.config = config
        self.clock = clock
        self.runtime = CoordinatorRuntime(clock, offsets_log, config.offsets_commit_timeout_ms)
        self.timers = Timers()
        self.groups: dict[str, Group] = {}
        """Classic groups, and the memberless holder of a KIP-848 group's committed offsets (same id)."""
        self.consumer = ConsumerGroupLogic(config.consumer_assignors)
        """KIP-848 groups and their reconciliation."""
        self.consumer_committed: dict[str, dict[bytes, bytes]] = {}
        """Per consumer group, its records as last committed (kept by :meth:`replay_consumer` alone): a change
        appends what differs from them; a failed append rebuilds the group from them."""
        self.owned: set[int] = set()
        self.loading: set[int] = set()
        self.closed = False
        self.order = itertools.count()
        """Numbers appended records in log order (appends to one partition take effect in call order)."""
        self.topics_source: Callable[[], TopicsSnapshot] | None = None
        """The broker's topics now (name → id, partition count), for classic members of consumer groups."""

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def check(self, group_id: str | None, *, allow_empty: bool = False) -> ErrorCode | None:
        """Kafka's validateGroupStatus: a usable id, this broker coordinating it, and its partition loaded."""
        if group_id is None or (not group_id and not allow_empty):
            return ErrorCode.invalid_group_id
        if self.closed:
            return ErrorCode.coordinator_not_available
        partition = self.partition_for(group_id)
        if partition in self.loading:
            return ErrorCode.coordinator_load_in_progress
        if partition not in self.owned:
            return ErrorCode.not_coordinator
        return None

    def now(self) -> int:
        return self.clock.now_ms()

    def schedule(self, deadline: int, action: Callable[[], None]) -> None:
        self.timers.schedule(deadline, action)

    def fire_due(self, now_ms: int) -> None:
        self.timers.fire_due(now_ms)

    def replay_consumer(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Apply a consumer group's records (key versions 3-8; other keys pass) to its committed records, whose
        offsets holder comes into being with the group."""
        committed = self.consumer_committed.setdefault(group_id, {})
        for key, value in records:
            if key_version(key) not in KEY_VERSIONS:
                continue
            if value is None:
                committed.pop(key, None)
            else:
                committed[key] = value
        if not committed:
            del self.consumer_committed[group_id]
        elif group_id not in self.groups:
            self.groups[group_id] = Group(group_id, state_timestamp=self.now())
