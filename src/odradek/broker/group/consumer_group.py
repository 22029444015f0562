"""KIP-848 consumer groups: the broker-side reconciliation that ConsumerGroupHeartbeat drives.

A group has a group epoch that moves whenever its members or their subscriptions (or the subscribed topics'
partition counts) change; the target assignment is recomputed by the server-side assignor when the group epoch
passes the assignment epoch. Each member converges on its target through Kafka's CurrentAssignmentBuilder rules:
partitions leaving a member are revoked first (the member stays at its epoch, in UNREVOKED_PARTITIONS, until a
heartbeat shows it no longer owns them); only then does it move to the target epoch and get the new partitions,
except those still held by another member, which it gets later (UNRELEASED_PARTITIONS). Nothing here does I/O
or reads the clock: the caller hands in a snapshot of the topics (name → id, partition count) and arms timers
itself. The decisions change the groups held here in place; the coordinator (:mod:`.consumer_groups`) writes their
records and rebuilds a group from its committed records when an append fails.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from odradek.broker.group.server_assignors import ASSIGNORS, AssignmentSpec
from odradek.errors import ErrorCode
from odradek.protocol.consumer_protocol import Subscription

Partitions = dict[str, frozenset[int]]
"""topic name → partitions."""

TopicsSnapshot = Mapping[str, tuple[uuid.UUID, int]]
"""The broker's topics when the heartbeat arrived: name → (topic id, partition count)."""

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(slots=True)
class ClassicMetadata:
    """A member that speaks the classic protocol inside a consumer group (Kafka's ClassicMemberMetadata): its
    session timeout and the (name, metadata) protocols of its last JoinGroup."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = 300_000
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: str = "stable"
    """stable, unrevoked_partitions or unreleased_partitions (Kafka's MemberState)."""
    assigned: Partitions = field(default_factory=dict)
    revoking: Partitions = field(default_factory=dict)
    last_sent: Partitions | None = None
    session_token: object = field(default_factory=object)
    revocation_deadline: int | None = None
    """When the member must have revoked its partitions (its rebalance timeout), while it has some to revoke."""
    classic: ClassicMetadata | None = None
    """Set for a classic-protocol member (JoinGroup/SyncGroup/Heartbeat) of a consumer group."""


@dataclass(slots=True)
class ConsumerGroupState:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Partitions] = field(default_factory=dict)
    subscribed_counts: dict[str, int] = field(default_factory=dict)
    """The partition counts of the subscribed topics when the group epoch last moved (Kafka's subscription
    metadata): a topic created, deleted or grown bumps the epoch."""
    assignor_name: str = ""

    @property
    def state(self) -> str:
        """Kafka's ConsumerGroupState names as ListGroups and ConsumerGroupDescribe report them."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch != self.group_epoch:
            return "Assigning"
        if any(m.member_epoch != self.assignment_epoch or m.state != "stable" for m in self.members.values()):
            return "Reconciling"
        return "Stable"


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_names: tuple[str, ...] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: Partitions | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    assignment: Partitions | None = None


def _flat(parts: Mapping[str, frozenset[int]]) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in parts.items() for p in ps}


def _nest(pairs: set[tuple[str, int]]) -> Partitions:
    out: dict[str, set[int]] = {}
    for t, p in pairs:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


def resolve_subscription(member: ConsumerMember, topics: TopicsSnapshot) -> frozenset[str]:
    """The topics a member subscribes to: its names plus the existing topics its regex matches in full
    (RE2/J's ``matches`` semantics, which Python's ``fullmatch`` shares for common patterns)."""
    names = {n for n in member.subscribed_names if n in topics}
    if member.subscribed_regex:
        try:
            pattern = re.compile(member.subscribed_regex)
        except re.error:
            pattern = None
        if pattern is not None:
            names.update(t for t in topics if not t.startswith("__") and pattern.fullmatch(t))
    return frozenset(names)


class ConsumerGroupLogic:
    """The decisions of Kafka's GroupMetadataManager for consumer groups, over groups this coordinator holds."""

    def __init__(self, assignors: tuple[str, ...] = ("uniform", "range")) -> None:
        self.assignors = assignors
        self.groups: dict[str, ConsumerGroupState] = {}

    def heartbeat(
        self, req: HeartbeatRequest, topics: TopicsSnapshot, new_member_id: Callable[[], str]
    ) -> HeartbeatResult:
        error = self.validate(req)
        if error is not None:
            return error
        group = self.groups.get(req.group_id)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if group is None or req.member_id not in group.members:
                return HeartbeatResult(ErrorCode.unknown_member_id, member_id=req.member_id)
            leaving = group.members[req.member_id]
            if req.member_epoch == STATIC_LEAVE_EPOCH and leaving.instance_id is not None:
                # A static member that will come back keeps its partitions until its session runs out.
                if leaving.member_epoch != STATIC_LEAVE_EPOCH:
                    leaving.previous_member_epoch = leaving.member_epoch
                    leaving.member_epoch = STATIC_LEAVE_EPOCH
            else:
                self.remove_member(group, req.member_id, topics)
            return HeartbeatResult(ErrorCode.none, member_id=req.member_id, member_epoch=req.member_epoch)
        if group is None:
            if req.member_epoch != 0:  # Kafka's GroupMetadataManager.consumerGroup(groupId) without creating
                return HeartbeatResult(ErrorCode.group_id_not_found, f"Consumer group {req.group_id} not found.")
            group = self.groups[req.group_id] = ConsumerGroupState(req.group_id)
        member_id = req.member_id or new_member_id()
        member = group.members.get(member_id)
        if req.member_epoch == 0:
            static = None
            if req.instance_id is not None:
                same = [m for m in group.members.values() if m.instance_id == req.instance_id]
                static = next((m for m in same if m.member_id != member_id), None)
                if static is not None and static.member_epoch != STATIC_LEAVE_EPOCH:
                    return HeartbeatResult(
                        ErrorCode.unreleased_instance_id,
                        f"Static member with unknown member id and instance id {req.instance_id} cannot replace "
                        "its predecessor that has not left",
                    )
            if static is not None:
                # The static member is back under a new member id: it takes over its predecessor's epoch and
                # partitions, and the group epoch only moves if its subscription changed.
                del group.members[static.member_id]
                if static.member_id in group.target:
                    group.target[member_id] = group.target.pop(static.member_id)
                member = static
                member.member_id, member.member_epoch = member_id, member.previous_member_epoch
                member.session_token, member.revocation_deadline, member.last_sent = object(), None, None
                group.members[member_id] = member
                changed = False
            else:
                if member is None:
                    member = ConsumerMember(member_id)
                else:
                    member = ConsumerMember(member_id, assigned=member.assigned, revoking=member.revoking)
                group.members[member_id] = member
                changed = True
        else:
            if member is None:
                return HeartbeatResult(ErrorCode.unknown_member_id, f"unknown member {member_id}")
            if req.member_epoch != member.member_epoch:
                lost_response = (
                    req.member_epoch == member.previous_member_epoch
                    and req.owned is not None
                    and _flat(req.owned) <= _flat(member.assigned)
                )
                if not lost_response:
                    return HeartbeatResult(
                        ErrorCode.fenced_member_epoch,
                        f"member epoch {req.member_epoch} is not the current {member.member_epoch}",
                    )
            changed = False
        changed |= self._update_member(member, req)
        if changed or self._metadata_changed(group, topics):
            self._bump(group, topics)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, topics)
        self._reconcile(group, member, req.owned)
        # The assignment goes out when it differs from what the member was last told or reports owning, or on a join.
        send = None
        if (
            req.member_epoch == 0
            or member.last_sent != member.assigned
            or (req.owned is not None and _flat(req.owned) != _flat(member.assigned))
        ):
            send = member.assigned
        if send is not None:
            member.last_sent = dict(member.assigned)
        return HeartbeatResult(ErrorCode.none, member_id=member_id, member_epoch=member.member_epoch, assignment=send)

    def validate(self, req: HeartbeatRequest) -> HeartbeatResult | None:
        """The request's own errors (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR...), before any group is touched."""
        def bad(message: str) -> HeartbeatResult:
            return HeartbeatResult(ErrorCode.invalid_request, message)

        if not req.group_id:
            return bad("GroupId can't be empty.")
        if req.member_epoch > 0 and not req.member_id:
            return bad("MemberId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                return bad("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None:
                return bad("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_names is None and req.subscribed_regex is None:
                return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        if req.member_epoch < STATIC_LEAVE_EPOCH:
            return HeartbeatResult(ErrorCode.fenced_member_epoch, "member epoch below -2")
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            return bad("InstanceId can't be null when leaving as a static member.")
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            return HeartbeatResult(
                ErrorCode.unsupported_assignor, f"ServerAssignor {req.server_assignor} is not supported."
            )
        if req.subscribed_regex is not None:
            try:
                re.compile(req.subscribed_regex)
            except re.error as e:
                return HeartbeatResult(ErrorCode.invalid_request, f"bad regex: {e}")
        return None

    @staticmethod
    def _update_member(member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Apply the fields the request carries; True when the subscription changed (the group epoch moves)."""
        changed = False
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.subscribed_names is not None and tuple(sorted(req.subscribed_names)) != member.subscribed_names:
            member.subscribed_names = tuple(sorted(req.subscribed_names))
            changed = True
        if req.subscribed_regex is not None and req.subscribed_regex != member.subscribed_regex:
            member.subscribed_regex = req.subscribed_regex or None
            changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        return changed

    def _subscribed_counts(self, group: ConsumerGroupState, topics: TopicsSnapshot) -> dict[str, int]:
        names: set[str] = set()
        for m in group.members.values():
            names |= resolve_subscription(m, topics)
        return {t: topics[t][1] for t in sorted(names)}

    def _metadata_changed(self, group: ConsumerGroupState, topics: TopicsSnapshot) -> bool:
        return self._subscribed_counts(group, topics) != group.subscribed_counts

    def _bump(self, group: ConsumerGroupState, topics: TopicsSnapshot) -> None:
        group.group_epoch += 1
        group.subscribed_counts = self._subscribed_counts(group, topics)

    def _assignor_for(self, group: ConsumerGroupState) -> str:
        """The most used server_assignor among members (ties to the configured order), else the default."""
        votes = [m.server_assignor for m in group.members.values() if m.server_assignor]
        if not votes:
            return self.assignors[0]
        return max(sorted(set(votes), key=self.assignors.index), key=votes.count)

    def _compute_target(self, group: ConsumerGroupState, topics: TopicsSnapshot) -> None:
        name = self._assignor_for(group)
        spec = AssignmentSpec(
            subscriptions={mid: resolve_subscription(m, topics) for mid, m in group.members.items()},
            partition_counts={t: topics[t][1] for t in topics},
            previous=group.target,
        )
        group.target = {m: dict(a) for m, a in ASSIGNORS[name](spec).items()}
        group.assignor_name = name
        group.assignment_epoch = group.group_epoch

    def _owners(self, group: ConsumerGroupState, exclude: str) -> set[tuple[str, int]]:
        held: set[tuple[str, int]] = set()
        for mid, m in group.members.items():
            if mid != exclude:
                held |= _flat(m.assigned) | _flat(m.revoking)
        return held

    def _reconcile(self, group: ConsumerGroupState, member: ConsumerMember, owned: Partitions | None) -> None:
        """Kafka's CurrentAssignmentBuilder: revoke first, then take the target epoch and the free partitions."""
        if member.state == "unrevoked_partitions":
            if owned is None or _flat(owned) & _flat(member.revoking):
                return
            member.revoking = {}
        target = _flat(group.target.get(member.member_id, {}))
        if member.member_epoch == group.assignment_epoch and member.state == "stable":
            return
        current = _flat(member.assigned)
        keep = current & target
        revoke = current - target
        if revoke:
            member.assigned = _nest(keep)
            member.revoking = _nest(revoke)
            member.state = "unrevoked_partitions"
            return
        held = self._owners(group, member.member_id)
        member.assigned = _nest(keep | (target - current - held))
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
        member.state = "unreleased_partitions" if (target - current) & held else "stable"

    # --- classic members (KIP-848's online migration) -------------------------------------------------------

    def classic_join(
        self,
        group: ConsumerGroupState,
        member_id: str,
        instance_id: str | None,
        rebalance_timeout_ms: int,
        classic: ClassicMetadata,
        subscription: Subscription,
        topics: TopicsSnapshot,
        client_id: str = "",
        client_host: str = "",
    ) -> ConsumerMember:
        """A classic member's JoinGroup (Kafka's classicGroupJoinToConsumerGroup): update its subscription,
        recompute the target if the group epoch moved, and reconcile it against the partitions it says it owns.
        An eager member (or a v0 subscription, which cannot say) owns nothing when it joins."""
        member = group.members.get(member_id)
        changed = member is None
        predecessor = None
        if member is None and instance_id is not None:
            predecessor = next((m for m in group.members.values() if m.instance_id == instance_id), None)
        if predecessor is not None:
            # A restarted static member under a new member id takes over its predecessor's epoch and partitions.
            del group.members[predecessor.member_id]
            if predecessor.member_id in group.target:
                group.target[member_id] = group.target.pop(predecessor.member_id)
            member = predecessor
            member.member_id, member.session_token, member.revocation_deadline = member_id, object(), None
            group.members[member_id] = member
            changed = False
        elif member is None:
            member = group.members[member_id] = ConsumerMember(member_id)
        member.classic = classic
        req = HeartbeatRequest(
            group.group_id, member_id, member.member_epoch, instance_id=instance_id, rack_id=subscription.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms, subscribed_names=subscription.topics,
            client_id=client_id, client_host=client_host,
        )
        changed |= self._update_member(member, req)
        if changed or self._metadata_changed(group, topics):
            self._bump(group, topics)
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, topics)
        owned = {t: ps for t, ps in subscription.owned.items() if t in topics}
        self._reconcile(group, member, owned)
        member.last_sent = dict(member.assigned)
        return member

    def classic_must_rejoin(self, group: ConsumerGroupState, member: ConsumerMember) -> bool:
        """Kafka's classicGroupHeartbeatToConsumerGroup: a classic member rejoins to catch up with a new group
        epoch, to finish revoking, or to collect partitions another member has released meanwhile."""
        if member.member_epoch < group.group_epoch or member.state == "unrevoked_partitions":
            return True
        if member.state == "unreleased_partitions":
            missing = _flat(group.target.get(member.member_id, {})) - _flat(member.assigned)
            return not missing & self._owners(group, member.member_id)
        return False

    def only_classic_left(self, group: ConsumerGroupState, leaving: str) -> bool:
        """Whether removing ``leaving`` leaves a non-empty group of classic members only (a downgrade)."""
        rest = [m for mid, m in group.members.items() if mid != leaving]
        return bool(rest) and all(m.classic is not None for m in rest)

    def remove_member(self, group: ConsumerGroupState, member_id: str, topics: TopicsSnapshot) -> None:
        """A member left or its session expired: its partitions go back to the pool and the group epoch moves."""
        if group.members.pop(member_id, None) is None:
            return
        group.target.pop(member_id, None)
        self._bump(group, topics)
        if group.members:
            self._compute_target(group, topics)
        else:
            group.assignment_epoch = group.group_epoch
