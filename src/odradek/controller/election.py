"""The controller's four leader selectors (seed 001 section 4.2) as pure functions over the context.

Each turns a partition's current leader and ISR into the state to write (leader epoch + 1) and the brokers that
must hear about it, or into the Kafka error code an ElectLeaders caller would see. The rules themselves are the
placement library's (`offline_election`, `reassign_election`, `preferred_election`, `controlled_shutdown_election`),
so there is one definition of each rule in the project.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.controller.context import ControllerContext, LeaderIsr, TopicPartition
from odradek.controller.results import ELECTION_NOT_NEEDED
from odradek.errors import ErrorCode
from odradek.placement import (
    controlled_shutdown_election,
    offline_election,
    preferred_election,
    reassign_election,
)

__all__ = ["Elected", "Election", "NotElected", "elect_leader", "needs_unclean_config", "without_replica"]


class Election(enum.Enum):
    OFFLINE = "offline"
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


@dataclass(frozen=True, slots=True)
class Elected:
    tp: TopicPartition
    new: LeaderIsr
    """The state to write; ``zk_version`` is still the version it must replace."""
    recipients: tuple[int, ...]
    unclean: bool = False


@dataclass(frozen=True, slots=True)
class NotElected:
    tp: TopicPartition
    error: ErrorCode
    reason: str


def needs_unclean_config(ctx: ControllerContext, tp: TopicPartition) -> bool:
    """Whether an offline election of ``tp`` depends on its topic's ``unclean.leader.election.enable``: only
    when no live replica is in the ISR, which is when Kafka reads the topic config too."""
    current = ctx.leadership.get(tp)
    live = ctx.live_broker_ids
    isr = current.isr if current else ()
    return not any(r in live and r in isr for r in ctx.replicas_of(tp))


def elect_leader(
    kind: Election, ctx: ControllerContext, tp: TopicPartition, unclean_allowed: bool = False,
    reassign_target: Sequence[int] | None = None,
) -> Elected | NotElected:
    """``reassign_target`` is the target replica set of a reassignment election: the reassignment passes it
    because the context records a reassignment in progress only once its first write has landed."""
    current = ctx.leadership.get(tp)
    assignment = ctx.assignments.get(tp)
    if current is None or assignment is None:
        return NotElected(tp, ErrorCode.unknown_topic_or_partition, "no leader and ISR for the partition")
    if current.controller_epoch > ctx.epoch:
        return NotElected(
            tp, ErrorCode.not_controller,
            f"state written by controller epoch {current.controller_epoch}, newer than ours ({ctx.epoch})",
        )
    replicas = assignment.replicas
    live = ctx.live_broker_ids
    isr = list(current.isr)
    if kind is Election.OFFLINE:
        live = {b for b in live if ctx.is_replica_online(b, tp)}
        result = offline_election(
            replicas, isr, live, unclean_allowed, current.leader_epoch, leader_recovery_supported=False
        )
        recipients = tuple(r for r in replicas if r in live)
        if result.leader is None:
            return NotElected(
                tp, ErrorCode.eligible_leaders_not_available,
                f"no live replica of {list(replicas)} is in the ISR {isr}"
                + ("" if unclean_allowed else " and unclean leader election is disabled"),
            )
    elif kind is Election.REASSIGN:
        target = reassign_target if reassign_target is not None else ctx.being_reassigned.get(tp,
                                                                                             assignment.target)
        result = reassign_election(target, isr, live, current.leader_epoch)
        recipients = tuple(target)
        if result.leader is None:
            return NotElected(
                tp, ErrorCode.eligible_leaders_not_available,
                f"none of the reassigned replicas {list(target)} is live and in the ISR {isr}",
            )
    elif kind is Election.PREFERRED:
        if replicas and current.leader == replicas[0]:
            return NotElected(tp, ErrorCode.election_not_needed, ELECTION_NOT_NEEDED)
        result = preferred_election(replicas, isr, live, current.leader_epoch)
        recipients = tuple(replicas)
        if result.leader is None:
            return NotElected(
                tp, ErrorCode.preferred_leader_not_available,
                f"preferred replica {replicas[0] if replicas else None} is not live or not in the ISR {isr}",
            )
    else:
        live_or_down = ctx.live_or_shutting_down
        result = controlled_shutdown_election(
            replicas, isr, live_or_down, ctx.shutting_down, current.leader_epoch
        )
        recipients = tuple(r for r in replicas if r in live_or_down)
        if result.leader is None:
            return NotElected(
                tp, ErrorCode.eligible_leaders_not_available,
                f"no replica in the ISR {isr} besides the shutting down brokers {sorted(ctx.shutting_down)}",
            )
    new = LeaderIsr(result.leader, result.leader_epoch, tuple(result.isr), ctx.epoch, current.zk_version)
    return Elected(tp, new, recipients, unclean=result.unclean)


def without_replica(ctx: ControllerContext, current: LeaderIsr, replica: int) -> LeaderIsr | None:
    """Kafka's ``removeReplicaFromIsr``: the state after ``replica`` leaves the ISR, or None if it was not in it.

    The last ISR member stays in the ISR (with no leader) so that, with unclean election off, the partition comes
    back only when that member does.
    """
    if replica not in current.isr:
        return None
    leader = -1 if current.leader == replica else current.leader
    isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != replica)
    return LeaderIsr(leader, current.leader_epoch + 1, isr, ctx.epoch, current.zk_version)
