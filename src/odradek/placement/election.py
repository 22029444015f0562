"""Partition leader election rules of Kafka's controllers, and the leader/ISR state each election produces.

The ZooKeeper-era controller (``PartitionLeaderElectionAlgorithms`` + ``Election.scala``) decides leaders with
four pure rules; the KRaft controller (``PartitionChangeBuilder.electLeader``) differs in preferring to keep a
still-valid leader.  Both are pure functions of the partition's replicas, ISR and broker liveness, so they
live here and the controller only supplies those inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "DEFAULT_UNCLEAN_LEADER_ELECTION_ENABLE",
    "ElectionResult",
    "KRaftElection",
    "LeaderRecoveryState",
    "controlled_shutdown_election",
    "controlled_shutdown_leader",
    "kraft_elect_leader",
    "new_partition_state",
    "offline_election",
    "offline_leader",
    "preferred_election",
    "preferred_leader",
    "reassign_election",
    "reassign_leader",
]

DEFAULT_UNCLEAN_LEADER_ELECTION_ENABLE = False


def offline_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int], unclean: bool) -> int | None:
    """First live in-sync replica in assignment order; if none and ``unclean``, the first live replica."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica
    if unclean:
        for replica in assignment:
            if replica in live:
                return replica
    return None


def reassign_leader(reassignment: Sequence[int], isr: Collection[int], live: Collection[int]) -> int | None:
    """First replica of the *target* replica list that is live and in the ISR."""
    for replica in reassignment:
        if replica in live and replica in isr:
            return replica
    return None


def preferred_leader(assignment: Sequence[int], isr: Collection[int], live: Collection[int]) -> int | None:
    """The preferred replica (``assignment[0]``) if it is live and in the ISR; never a fallback."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int], shutting_down: Collection[int]
) -> int | None:
    """First live in-sync replica that is not shutting down (shutting-down brokers still count as live)."""
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return replica
    return None


class LeaderRecoveryState(Enum):
    """Kafka's ``LeaderRecoveryState``: RECOVERING after an unclean election."""

    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """The leader and ISR an election writes, with the bumped epoch; ``leader`` is None when nobody is
    eligible (the state is then unchanged)."""

    leader: int | None
    isr: list[int]
    leader_epoch: int
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    unclean: bool = False


def new_partition_state(assignment: Sequence[int], live: Collection[int]) -> ElectionResult:
    """A new partition: leader = first live replica, ISR = all live replicas, epoch 0."""
    live_replicas = [r for r in assignment if r in live]
    return ElectionResult(live_replicas[0] if live_replicas else None, live_replicas, 0)


def offline_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    unclean: bool,
    leader_epoch: int,
    leader_recovery_supported: bool = True,
) -> ElectionResult:
    """Offline-partition election: a clean leader keeps the live part of the ISR; an unclean one gets ISR =
    [leader] and, since IBP 3.2, the RECOVERING state."""
    leader = offline_leader(assignment, isr, live, unclean)
    if leader is None:
        return ElectionResult(None, list(isr), leader_epoch)
    if leader in isr:
        return ElectionResult(leader, [r for r in isr if r in live], leader_epoch + 1)
    state = LeaderRecoveryState.RECOVERING if leader_recovery_supported else LeaderRecoveryState.RECOVERED
    return ElectionResult(leader, [leader], leader_epoch + 1, state, unclean=True)


def reassign_election(
    reassignment: Sequence[int], isr: Sequence[int], live: Collection[int], leader_epoch: int
) -> ElectionResult:
    """Reassignment election: the ISR is unchanged, the epoch bumps."""
    leader = reassign_leader(reassignment, isr, live)
    return ElectionResult(leader, list(isr), leader_epoch + 1 if leader is not None else leader_epoch)


def preferred_election(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], leader_epoch: int
) -> ElectionResult:
    """Preferred-replica election: the ISR is unchanged, the epoch bumps."""
    leader = preferred_leader(assignment, isr, live)
    return ElectionResult(leader, list(isr), leader_epoch + 1 if leader is not None else leader_epoch)


def controlled_shutdown_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
    leader_epoch: int,
) -> ElectionResult:
    """Controlled-shutdown election: the shutting-down brokers leave the ISR."""
    leader = controlled_shutdown_leader(assignment, isr, live, shutting_down)
    if leader is None:
        return ElectionResult(None, list(isr), leader_epoch)
    return ElectionResult(leader, [r for r in isr if r not in shutting_down], leader_epoch + 1)


class KRaftElection(Enum):
    """``PartitionChangeBuilder.Election``."""

    PREFERRED = "PREFERRED"
    ONLINE = "ONLINE"
    UNCLEAN = "UNCLEAN"


def kraft_elect_leader(
    target_replicas: Sequence[int],
    target_isr: Collection[int],
    current_leader: int,
    election: KRaftElection,
    is_acceptable_leader: Callable[[int], bool],
    elr: Collection[int] = (),
) -> tuple[int, bool]:
    """KRaft's ``electLeader``: ``(leader or -1, unclean)``.

    A replica is valid when it is in the target ISR (or, with an empty ISR, in the ELR) and acceptable
    (unfenced, not shutting down).  PREFERRED takes the preferred replica, else keeps a valid current leader;
    ONLINE/UNCLEAN keep a valid current leader, else take the first valid replica; UNCLEAN finally falls back
    to the first acceptable replica and reports ``unclean=True``.
    """

    def valid(r: int) -> bool:
        in_set = r in target_isr if target_isr else r in elr
        return in_set and is_acceptable_leader(r)

    if election is KRaftElection.PREFERRED and target_replicas and valid(target_replicas[0]):
        return target_replicas[0], False
    if current_leader in target_replicas and valid(current_leader):
        return current_leader, False
    for replica in target_replicas:
        if valid(replica):
            return replica, False
    if election is KRaftElection.UNCLEAN:
        for replica in target_replicas:
            if is_acceptable_leader(replica):
                return replica, True
    return -1, False
