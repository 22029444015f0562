"""Consumer groups, classic and KIP-848: the group coordinator (split as Kafka's: classic groups, consumer groups,
online migration, offsets, and the runtime that appends records and replays them), its state machines and its
``__consumer_offsets`` records."""

from odradek.broker.group.config import OFFSETS_TOPIC, GroupConfig
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.metadata import Group, GroupState, Member
from odradek.broker.group.offsets_log import OffsetsLog
from odradek.broker.group.results import (
    GroupOverview,
    GroupSummary,
    JoinResult,
    MemberSummary,
    OffsetCommit,
    SyncResult,
)
from odradek.broker.group.schema import java_string_hashcode, partition_for

__all__ = [
    "OFFSETS_TOPIC",
    "Group",
    "GroupConfig",
    "GroupCoordinator",
    "GroupOverview",
    "GroupState",
    "GroupSummary",
    "JoinResult",
    "Member",
    "MemberSummary",
    "OffsetCommit",
    "OffsetsLog",
    "SyncResult",
    "java_string_hashcode",
    "partition_for",
]
