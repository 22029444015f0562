"""One classic consumer group's state, with the transitions and elections Kafka's GroupMetadata makes.

Nothing here waits, sends or writes: :class:`Group` only records who is in the group and answers questions
about it (is every member back? which protocol wins? who leads?), so every rule can be tested directly. The
coordinator owns time, futures and persistence.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.broker.group.schema import GroupValue, MemberValue, OffsetValue
from odradek.placement.model import TopicPartition


class GroupState(enum.Enum):
    """The classic protocol's states; the values are the names Kafka reports in DescribeGroups and
    ListGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}

Protocols = Sequence[tuple[str, bytes]]
"""A member's (name, metadata) pairs, in the member's order of preference."""


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    is_new: bool = False
    """Joined but not yet through a completed join: may be expired after the new-member join timeout."""
    join_waiter: Any = None
    """The pending JoinGroup answer (a future the coordinator resolves); set means "awaiting join"."""
    sync_waiter: Any = None
    """The pending SyncGroup answer; set means "awaiting sync"."""
    heartbeat_deadline: int = 0
    """Clock ms after which the member is considered failed (see the coordinator's expiry rule)."""
    heartbeat_armed_at: int | None = None
    """The deadline of the coordinator's one pending session timer for this member, if any."""

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols with the same metadata in the same order: a rejoin that changes nothing."""
        return len(protocols) == len(self.protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.protocols, strict=True)
        )

    def vote(self, candidates: set[str]) -> str:
        """The member's first preference among the protocols every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(slots=True)
class PendingTxnOffset:
    """One offset committed inside a transaction, replayed once its record is in the log; ``order`` is its place
    in the log (a later plain commit of the partition wins over it)."""

    value: OffsetValue
    order: int


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp: int | None = None
    """Wall-clock ms of the last transition; offsets of an Empty group expire relative to it."""
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    """Insertion-ordered: "the first remaining member" is the next leader."""
    static_members: dict[str, str] = field(default_factory=dict)
    """group.instance.id → current member id."""
    pending_members: set[str] = field(default_factory=set)
    """Member ids handed out with MEMBER_ID_REQUIRED whose second JoinGroup has not arrived yet."""
    pending_sync: set[str] = field(default_factory=set)
    """Members of the current generation that have not sent SyncGroup yet."""
    new_member_added: bool = False
    """A member joined during the initial delayed join: extend the delay once more."""
    offsets: dict[TopicPartition, OffsetValue] = field(default_factory=dict)
    offset_order: dict[TopicPartition, int] = field(default_factory=dict)
    """Where each committed offset's record sits in the log (any increasing number): a transaction's offsets,
    made visible by a later COMMIT marker, replace a committed offset only if they were appended after it."""
    """Plain commits appended but not yet acknowledged (require_stable answers UNSTABLE_OFFSET_COMMIT)."""
    pending_txn_offsets: dict[int, dict[TopicPartition, PendingTxnOffset]] = field(default_factory=dict)
    """Offsets committed inside a transaction, per producer id, invisible until its COMMIT marker."""
    _supported: Counter[str] = field(default_factory=Counter)

    # --- membership -----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member) -> None:
        """Add a member; the first member of a group fixes its protocol type and becomes its leader."""
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self._supported.update(set(member.protocol_names()))
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        """Remove a member; a departing leader is replaced by the first remaining member (or nobody)."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._supported.subtract(set(member.protocol_names()))
        self.pending_sync.discard(member_id)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def clear_members(self, now_ms: int) -> list[Member]:
        """Drop every member at once, without a rebalance: the group became a consumer group and this object
        only keeps its committed offsets. Returns the members that were here."""
        members = list(self.members.values())
        self.members.clear()
        self.static_members.clear()
        self.pending_members.clear()
        self.pending_sync.clear()
        self._supported.clear()
        self.leader_id = self.protocol_name = None
        self.new_member_added = False
        self.state, self.state_timestamp = GroupState.EMPTY, now_ms
        return members

    def adopt_members(self, generation: int, members: Sequence[Member], now_ms: int) -> None:
        """Become a Stable classic group of ``members`` at ``generation`` (a consumer group downgraded), their
        assignments already set; the caller starts the rebalance that follows."""
        self.clear_members(now_ms)
        self.generation_id = generation
        for member in members:
            self.add(member)
        self.protocol_type = members[0].protocol_type if members else None
        self.protocol_name = self.select_protocol() if members else None
        self.state = GroupState.STABLE if members else GroupState.EMPTY

    def update_protocols(self, member: Member, protocols: Protocols) -> None:
        self._supported.subtract(set(member.protocol_names()))
        member.protocols = [(name, bytes(metadata)) for name, metadata in protocols]
        self._supported.update(set(member.protocol_names()))

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """Give a static member a new member id (a restarted instance), keeping its place, leadership and
        assignment."""
        members = list(self.members.items())
        member = self.members[old_member_id]
        member.member_id = new_member_id
        self.members = {(new_member_id if mid == old_member_id else mid): m for mid, m in members}
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        return member

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A known group.instance.id presented with a member id other than the one it holds now."""
        current = self.static_member_id(instance_id)
        return current is not None and current != member_id

    @staticmethod
    def generate_member_id(client_id: str, instance_id: str | None) -> str:
        """Kafka's form: ``client_id-UUID`` for dynamic members, ``group.instance.id-UUID`` for static
        ones."""
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    # --- rebalance questions --------------------------------------------------------------------------------

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.is_awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp = now_ms

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self._supported.items() if count == n and n > 0}

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        """Whether a joining member can be part of this group at all (else INCONSISTENT_GROUP_PROTOCOL)."""
        names = {name for name, _ in protocols}
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Each member votes for its first protocol that all members support; most votes wins.

        Kafka breaks a tie by hash-map order; here the tie goes to the protocol voted for first in join order,
        so the result is deterministic (and the leader's preference wins a tie).
        """
        if not self.members:
            raise ValueError(f"group {self.group_id} has no members to select a protocol")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def maybe_elect_new_joined_leader(self) -> bool:
        """Before completing a join, make sure the leader is a member that rejoined; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        """Bump the generation: CompletingRebalance with a chosen protocol, or Empty when nobody is left."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """What the leader gets in its JoinGroup response: every member's metadata for the chosen protocol."""
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata_for(self.protocol_name)) for m in self.members.values()]

    # --- persistence ----------------------------------------------------------------------------------------

    # --- committed offsets (Kafka's GroupMetadata offset bookkeeping) -----------------------------------------

    def put_offset_if_newer(self, tp: TopicPartition, value: OffsetValue, order: int) -> None:
        """Make ``value`` the committed offset unless one appended later in the log is already visible."""
        current = self.offset_order.get(tp)
        if tp not in self.offsets or current is None or current < order:
            self.offsets[tp] = value
            self.offset_order[tp] = order

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """The producer's marker is in the log: publish (COMMIT) or drop (ABORT) its offsets; returns how many
        became visible."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        published = 0
        if commit:
            for tp, entry in pending.items():
                self.put_offset_if_newer(tp, entry.value, entry.order)
                published += 1
        return published

    def has_pending_offsets(self, tp: TopicPartition) -> bool:
        """Whether a transaction holds an offset of ``tp`` that awaits its marker (commits still appending are
        counted by the coordinator)."""
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets or self.pending_txn_offsets)

    def remove_offset(self, tp: TopicPartition) -> None:
        self.offsets.pop(tp, None)
        self.offset_order.pop(tp, None)

    def to_value(self, assignment: dict[str, bytes], now_ms: int) -> GroupValue:
        """The GroupMetadataValue Kafka writes after a SyncGroup (with assignments) or when the group
        empties."""
        protocol = self.protocol_name
        return GroupValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id if self.members else None,
            current_state_timestamp=self.state_timestamp if self.state_timestamp is not None else now_ms,
            members=[
                MemberValue(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.metadata_for(protocol) if protocol is not None else b"",
                    assignment=assignment.get(m.member_id, b""),
                )
                for m in self.members.values()
            ],
        )

    @classmethod
    def from_value(cls, group_id: str, value: GroupValue) -> Group:
        """Rebuild a group from its last stored metadata: Stable with its members, or Empty (as Kafka loads
        it)."""
        group = cls(group_id)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        for m in value.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.add(member)
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.protocol_type = value.protocol_type or None
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group
