"""KIP-848's online migration between the two group types, as Kafka 3.7+ does it (``group.consumer.migration.policy``).

Upgrade: a consumer-protocol member joining a non-empty classic group of protocol type ``consumer`` turns it into
a consumer group in place. Each classic member becomes a consumer-group member at the classic generation, stable,
owning what its last SyncGroup gave it, and that assignment becomes the target; the joining member then bumps the
group epoch, so the classic members learn through their heartbeats (REBALANCE_IN_PROGRESS) that they must rejoin,
and the consumer group serves their JoinGroup/SyncGroup/Heartbeat from then on.

Downgrade: when the last consumer-protocol member leaves a group whose other members all speak the classic protocol,
the group becomes a classic group again at the group epoch as generation, each member holding its target
assignment, and a rebalance starts so the classic leader assigns anew.

Both directions are pure here: the coordinator writes the records (tombstones of the old type, the new type's
records) and moves the timers.
"""

from __future__ import annotations

import enum

from odradek.broker.group.consumer_group import (
    ClassicMetadata,
    ConsumerGroupState,
    ConsumerMember,
    TopicsSnapshot,
)
from odradek.broker.group.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version_of,
)
from odradek.broker.group.metadata import Group, Member


class MigrationPolicy(enum.Enum):
    """``group.consumer.migration.policy``; Kafka 4's default is bidirectional."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @property
    def upgrade(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


def can_upgrade(classic: Group, policy: MigrationPolicy, max_size: int) -> bool:
    return policy.upgrade and classic.protocol_type == PROTOCOL_TYPE and len(classic.members) <= max_size


def to_consumer_group(classic: Group, topics: TopicsSnapshot) -> ConsumerGroupState:
    """The consumer group a classic group becomes; ConsumerProtocolError if a member's metadata is unreadable."""
    generation = classic.generation_id
    group = ConsumerGroupState(classic.group_id, group_epoch=generation, assignment_epoch=generation)
    for member in classic.members.values():
        protocol = classic.protocol_name or member.protocols[0][0]
        subscription = decode_subscription(member.metadata_for(protocol))
        assigned = {t: ps for t, ps in decode_assignment(member.assignment).items() if t in topics and ps}
        group.members[member.member_id] = ConsumerMember(
            member.member_id,
            instance_id=member.group_instance_id,
            rack_id=subscription.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_names=tuple(sorted(subscription.topics)),
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            member_epoch=generation,
            previous_member_epoch=generation,
            assigned=assigned,
            last_sent=dict(assigned),
            classic=ClassicMetadata(member.session_timeout_ms, list(member.protocols)),
        )
        group.target[member.member_id] = dict(assigned)
    # The subscribed topics' partition counts, as the classic generation saw them: the records name assigned
    # partitions by topic id through them, and a joining member compares against them.
    subscribed = {t for m in group.members.values() for t in m.subscribed_names if t in topics}
    group.subscribed_counts = {t: topics[t][1] for t in sorted(subscribed)}
    return group


def to_classic_members(group: ConsumerGroupState, leaving: str) -> list[Member]:
    """The classic members a consumer group of classic members becomes once ``leaving`` is gone, each with its
    target assignment encoded in its own subscription version."""
    members = []
    for member_id, m in group.members.items():
        if member_id == leaving or m.classic is None:
            continue
        try:
            version = version_of(m.classic.protocols[0][1])
        except (ConsumerProtocolError, IndexError):
            version = 0
        members.append(
            Member(
                member_id=member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic.session_timeout_ms,
                protocol_type=PROTOCOL_TYPE,
                protocols=list(m.classic.protocols),
                assignment=encode_assignment(group.target.get(member_id, {}), version),
            )
        )
    return members
