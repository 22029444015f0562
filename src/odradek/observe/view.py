"""The broker's state read into plain data, on its event loop, for the metrics and the console.

Only the event loop mutates the broker's dictionaries, so reading them here, on the same loop, needs no lock and
never sees half an update. Each function takes the part it reads, not the broker.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from odradek.broker.group import GroupCoordinator
from odradek.broker.metadata import MetadataCache
from odradek.broker.replica_manager import ReplicaManager
from odradek.controller import Controller, PartitionState
from odradek.placement.model import TopicPartition

__all__ = [
    "BrokerGauges",
    "ControllerGauges",
    "GroupOffset",
    "broker_gauges",
    "controller_gauges",
    "decode_assignment",
    "group_offsets",
    "groups_json",
    "leader_high_watermarks",
    "local_high_watermark",
    "metadata_topics",
    "reassignments_json",
]


@dataclass(frozen=True, slots=True)
class BrokerGauges:
    partitions: int
    leaders: int
    under_replicated: int
    under_min_isr: int
    at_min_isr: int


def broker_gauges(replicas: ReplicaManager) -> BrokerGauges:
    """Kafka's ReplicaManager gauges: URP and UnderMinIsr are counted on leaders only, as Kafka counts them."""
    leaders = under = under_min = at_min = 0
    for part in replicas.partitions.values():
        if not part.is_leader:
            continue
        leaders += 1
        isr = len(part.isr)
        if isr < len(part.replicas):
            under += 1
        if isr < part.min_isr:
            under_min += 1
        elif isr == part.min_isr:
            at_min += 1
    return BrokerGauges(len(replicas.partitions), leaders, under, under_min, at_min)


@dataclass(frozen=True, slots=True)
class ControllerGauges:
    active: int
    offline_partitions: int
    preferred_imbalance: int
    global_partitions: int
    global_topics: int


def controller_gauges(controller: Controller) -> ControllerGauges:
    """Kafka reports these on the active controller only; every other broker says 0."""
    if not controller.is_active:
        return ControllerGauges(0, 0, 0, 0, 0)
    ctx = controller.ctx
    deleting = ctx.topics_to_delete
    offline = sum(
        1 for tp, state in controller.partition_states()
        if state is PartitionState.OFFLINE and tp.topic not in deleting
    )
    imbalance = 0
    for tp, state in ctx.leadership.items():
        replicas = ctx.replicas_of(tp)
        if replicas and state.leader != replicas[0] and tp.topic not in deleting:
            imbalance += 1
    return ControllerGauges(1, offline, imbalance, len(ctx.assignments), len(ctx.all_topics))


@dataclass(frozen=True, slots=True)
class GroupOffset:
    group: str
    topic: str
    partition: int
    committed: int
    end: int | None
    """The partition's high watermark where known; lag is ``end - committed``."""

    @property
    def lag(self) -> int | None:
        return None if self.end is None else max(0, self.end - self.committed)


def local_high_watermark(replicas: ReplicaManager) -> Callable[[str, int], int | None]:
    """A partition's high watermark as this broker's replica has it (a follower's trails its leader's by one
    fetch), or None where this broker hosts no replica."""

    def lookup(topic: str, partition: int) -> int | None:
        part = replicas.get(TopicPartition(topic, partition))
        return None if part is None else part.high_watermark

    return lookup


def group_offsets(groups: GroupCoordinator, end_of: Callable[[str, int], int | None]) -> Iterator[GroupOffset]:
    """Committed offsets of every group this broker coordinates, with the partition's end where known."""
    _error, overviews = groups.list_groups()
    for overview in overviews:
        _err, offsets = groups.fetch_offsets(overview.group_id, None)
        for (topic, partition), value in sorted(offsets.items()):
            if value is None:
                continue
            yield GroupOffset(overview.group_id, topic, partition, value.offset, end_of(topic, partition))


def leader_high_watermarks(replicas: ReplicaManager) -> list[list[Any]]:
    """``[topic, partition, high watermark]`` of every partition this broker leads."""
    return [[p.topic, p.index, p.high_watermark] for p in replicas.partitions.values() if p.is_leader]


def decode_assignment(data: bytes) -> list[list[Any]]:
    """A consumer member's assignment (ConsumerProtocolAssignment: version, [topic, [partition]], user data) as
    ``[[topic, [partitions]]]``; anything else (a Connect worker's, garbage) as ``[]``."""
    try:
        offset = 2
        (count,) = struct.unpack_from(">i", data, offset)
        offset += 4
        out: list[list[Any]] = []
        for _ in range(max(count, 0)):
            (length,) = struct.unpack_from(">h", data, offset)
            offset += 2
            topic = bytes(data[offset:offset + length]).decode()
            offset += length
            (n,) = struct.unpack_from(">i", data, offset)
            offset += 4
            parts = list(struct.unpack_from(f">{max(n, 0)}i", data, offset))
            offset += 4 * max(n, 0)
            out.append([topic, parts])
        return out
    except (struct.error, UnicodeDecodeError, ValueError):
        return []


def groups_json(groups: GroupCoordinator, broker_id: int) -> list[dict[str, Any]]:
    """Every group this broker coordinates: state, members with their assignments, committed offsets."""
    out: list[dict[str, Any]] = []
    _error, overviews = groups.list_groups()
    for overview in sorted(overviews, key=lambda o: o.group_id):
        _err, summary = groups.describe_group(overview.group_id)
        members = []
        if summary is not None:
            members = [
                {"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                 "host": m.client_host, "assignment": decode_assignment(m.assignment)}
                for m in summary.members
            ]
        _err, offsets = groups.fetch_offsets(overview.group_id, None)
        out.append({
            "group": overview.group_id,
            "state": overview.state,
            "protocol_type": overview.protocol_type,
            "protocol": summary.protocol if summary is not None else "",
            "coordinator": broker_id,
            "members": members,
            "offsets": [[t, p, v.offset] for (t, p), v in sorted(offsets.items()) if v is not None],
        })
    return out


def reassignments_json(controller: Controller) -> list[dict[str, Any]]:
    """Reassignments in progress, as the active controller's context holds them (empty elsewhere)."""
    if not controller.is_active:
        return []
    ctx = controller.ctx
    out = []
    for tp in sorted(ctx.being_reassigned):
        ra = ctx.assignments.get(tp)
        if ra is not None:
            out.append({"topic": tp.topic, "partition": tp.partition, "replicas": list(ra.replicas),
                        "adding": list(ra.adding), "removing": list(ra.removing)})
    return out


def metadata_topics(metadata: MetadataCache) -> list[dict[str, Any]]:
    """Every topic's partitions as this broker's metadata cache has them (what the controller last sent)."""
    out = []
    for name in sorted(metadata.topics):
        meta = metadata.topics[name]
        parts = []
        for index in sorted(meta.partitions):
            p = meta.partitions[index]
            parts.append({
                "partition": index, "leader": p.leader, "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas), "isr": list(p.isr), "offline_replicas": list(p.offline_replicas),
                "preferred": p.replicas[0] if p.replicas else -1,
                "under_replicated": len(p.isr) < len(p.replicas),
                "offline": p.leader < 0,
            })
        out.append({"name": name, "internal": meta.internal, "partitions": parts})
    return out
