"""Replica placement exactly as Kafka's ``AdminUtils.assignReplicasToBrokers`` and its ZooKeeper-era callers.

Kafka spreads leaders round-robin from a start index and shifts each follower by a per-round offset so that
replicas of consecutive partitions do not pile onto the same followers; with racks it first interleaves
brokers rack by rack and then skips brokers whose rack (or broker) already holds a replica while unused ones
remain.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from .errors import (
    AdminOperationException,
    InvalidPartitionsException,
    InvalidReplicaAssignmentException,
    InvalidReplicationFactorException,
)
from .model import BrokerMetadata

__all__ = [
    "assign_replicas_to_brokers",
    "broker_metadatas",
    "new_partitions_assignment",
    "rack_alternated_broker_list",
    "validate_manual_assignment",
]

_RAND = random.Random()


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Brokers interleaved rack by rack (racks sorted, brokers of a rack sorted), as Kafka's
    ``getRackAlternatedBrokerList``: consecutive entries sit on different racks while racks last."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker)
    racks = sorted(by_rack)
    queues = [sorted(by_rack[r]) for r in racks]
    positions = [0] * len(racks)
    result: list[int] = []
    rack_index = 0
    total = len(broker_racks)
    while len(result) < total:
        q = queues[rack_index]
        if positions[rack_index] < len(q):
            result.append(q[positions[rack_index]])
            positions[rack_index] += 1
        rack_index = (rack_index + 1) % len(racks)
    return result


def _replica_index(first: int, second_shift: int, j: int, n: int) -> int:
    return (first + 1 + (second_shift + j) % (n - 1)) % n


def assign_replicas_to_brokers(
    n_partitions: int,
    replication_factor: int,
    brokers: Sequence[BrokerMetadata],
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's ``AdminUtils.assignReplicasToBrokers``: partition id -> replica list (leader first).

    Rack-aware when every broker has a rack; with ``fixed_start_index < 0`` the start index and the replica
    shift are two independent random draws (from ``rng`` when given, so callers can make them reproducible).
    """
    if n_partitions <= 0:
        raise InvalidPartitionsException("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorException("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorException(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    draw = (rng or _RAND).randrange
    if all(b.rack is None for b in brokers):
        ids = [b.id for b in brokers]
        n = len(ids)
        start_index = fixed_start_index if fixed_start_index >= 0 else draw(n)
        shift = fixed_start_index if fixed_start_index >= 0 else draw(n)
        return _unaware(n_partitions, replication_factor, ids, start_index, shift, start_partition_id)
    rack_of: dict[int, str] = {}
    for b in brokers:
        if b.rack is None:
            raise AdminOperationException("Not all brokers have rack information for replica rack aware assignment.")
        rack_of[b.id] = b.rack
    arranged = rack_alternated_broker_list(rack_of)
    n = len(arranged)
    start_index = fixed_start_index if fixed_start_index >= 0 else draw(n)
    shift = fixed_start_index if fixed_start_index >= 0 else draw(n)
    return _aware(n_partitions, replication_factor, arranged, rack_of, start_index, shift, start_partition_id)


def _unaware(
    n_partitions: int, rf: int, ids: list[int], start_index: int, shift: int, start_partition_id: int
) -> dict[int, list[int]]:
    n = len(ids)
    result: dict[int, list[int]] = {}
    current = max(0, start_partition_id)
    followers = range(rf - 1)
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        if rf == 1:
            result[current] = [ids[first]]
        else:
            m = n - 1
            result[current] = [ids[first]] + [ids[(first + 1 + (shift + j) % m) % n] for j in followers]
        current += 1
    return result


def _aware(
    n_partitions: int,
    rf: int,
    arranged: list[int],
    rack_of: dict[int, str],
    start_index: int,
    shift: int,
    start_partition_id: int,
) -> dict[int, list[int]]:
    n = len(arranged)
    n_racks = len(set(rack_of.values()))
    racks = [rack_of[b] for b in arranged]
    result: dict[int, list[int]] = {}
    current = max(0, start_partition_id)
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        replicas = [arranged[first]]
        used_racks = {racks[first]}
        used_brokers = {arranged[first]}
        k = 0
        second_shift = shift * n_racks
        for _j in range(rf - 1):
            while True:
                idx = _replica_index(first, second_shift, k, n)
                k += 1
                broker = arranged[idx]
                rack = racks[idx]
                if (rack not in used_racks or len(used_racks) == n_racks) and (
                    broker not in used_brokers or len(used_brokers) == n
                ):
                    replicas.append(broker)
                    used_racks.add(rack)
                    used_brokers.add(broker)
                    break
        result[current] = replicas
        current += 1
    return result


def broker_metadatas(
    brokers: Sequence[BrokerMetadata], rack_aware_mode: str, broker_list: Sequence[int] | None = None
) -> list[BrokerMetadata]:
    """ZooKeeper-era ``AdminZkClient.getBrokerMetadatas``: brokers sorted by id, racks kept per
    ``RackAwareMode``.

    ``Enforced`` rejects partial rack information, ``Safe`` drops all racks when some are missing,
    ``Disabled`` always drops them.
    """
    chosen = [b for b in brokers if broker_list is None or b.id in set(broker_list)]
    chosen.sort(key=lambda b: b.id)
    with_rack = sum(1 for b in chosen if b.rack is not None)
    partial = 0 < with_rack < len(chosen)
    if rack_aware_mode == "Enforced" and partial:
        raise AdminOperationException(
            "Not all brokers have rack information. Add --disable-rack-aware in command line to make replica "
            "assignment without rack information."
        )
    if rack_aware_mode == "Disabled" or (rack_aware_mode == "Safe" and partial):
        return [BrokerMetadata(b.id) for b in chosen]
    if rack_aware_mode not in ("Enforced", "Safe", "Disabled"):
        raise ValueError(f"unknown rack aware mode {rack_aware_mode!r}")
    return chosen


def new_partitions_assignment(
    brokers: Sequence[BrokerMetadata], existing: Mapping[int, Sequence[int]], new_total_partitions: int
) -> dict[int, list[int]]:
    """Placement of partitions added to a topic (ZooKeeper-era ``createNewPartitionsAssignment``).

    The start index continues from partition 0's leader so new partitions keep the original round-robin going.
    """
    existing_count = len(existing)
    partition_zero = list(existing[0])
    ordered = sorted(brokers, key=lambda b: b.id)
    ids = [b.id for b in ordered]
    start_index = next((i for i, b in enumerate(ids) if b >= partition_zero[0]), 0)
    return assign_replicas_to_brokers(
        new_total_partitions - existing_count,
        len(partition_zero),
        ordered,
        fixed_start_index=max(0, start_index),
        start_partition_id=existing_count,
    )


def validate_manual_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """Reject a hand-written assignment as Kafka's ``validateTopicCreate`` does (including its weak key check:
    the non-negative keys must sum to ``n(n-1)/2`` and be distinct)."""
    if not assignment:
        raise InvalidReplicaAssignmentException("Replica assignment is empty")
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1:
        raise InvalidReplicaAssignmentException("All partitions should have the same number of replicas")
    for replicas in assignment.values():
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentException(f"Duplicate replica assignment found: {list(replicas)}")
    keys = list(assignment)
    n = len(keys)
    if sum(k for k in keys if k >= 0) != n * (n - 1) // 2 or len(set(keys)) != n:
        raise InvalidReplicaAssignmentException("partitions should be a consecutive 0-based integer sequence")
