"""KIP-848's online migration between the two group types, as Kafka 3.7+ does it (``group.consumer.migration.policy``).

Upgrade: a consumer-protocol member joining a non-empty classic group of protocol type ``consumer`` turns it into
a consumer group in place. Each classic member becomes a consumer-group member at the classic generation, stable,
owning what its last SyncGroup gave it, and that assignment becomes the target; the joining member then bumps the
group epoch, so the classic members learn through their heartbeats (REBALANCE_IN_PROGRESS) that they must rejoin,
and the consumer group serves their JoinGroup/SyncGroup/Heartbeat from then on.

Downgrade: when the last consumer-protocol member leaves a group whose other members all speak the classic protocol,
the group becomes a classic group again at the group epoch as generation, each member holding its target
assignment, and a rebalance starts so the classic leader assigns anew.

The conversions themselves are pure functions of the group (:func:`to_consumer_group`, :func:`to_classic_members`).
:class:`OnlineMigration` carries them out under the records-first rule: an upgrade installs the consumer group for
the heartbeat that asked for it and touches the classic group only once the records (the classic tombstone ahead
of the consumer group's) are committed; a downgrade writes the consumer group's tombstones and the classic record
in one batch and changes memory only when it is committed.
"""

from __future__ import annotations

import enum
import logging

from odradek.broker.group.classic import ClassicGroups, resolve
from odradek.broker.group.consumer_group import (
    ClassicMetadata,
    ConsumerGroupState,
    ConsumerMember,
    TopicsSnapshot,
)
from odradek.broker.group.context import CoordinatorContext
from odradek.broker.group.metadata import Group, Member
from odradek.broker.group.results import SyncResult, join_error
from odradek.broker.group.runtime import Records, group_error
from odradek.broker.group.schema import GroupKey, encode_group_value, encode_key
from odradek.errors import ErrorCode
from odradek.protocol.consumer_protocol import (
    PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    version_of,
)

log = logging.getLogger(__name__)


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


class OnlineMigration:
    """Upgrades and downgrades between classic and consumer groups, each written before memory changes; the
    consumer-group side calls it holding the group's lock."""

    def __init__(self, ctx: CoordinatorContext, classic: ClassicGroups) -> None:
        self.ctx = ctx
        self.classic = classic
        self.policy = MigrationPolicy(ctx.config.consumer_migration_policy)

    def may_downgrade(self, group: ConsumerGroupState, leaving: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        if not self.ctx.consumer.only_classic_left(group, leaving):
            return False
        if not self.policy.downgrade:
            log.info("consumer group %s stays a consumer group: online downgrade is disabled", group.group_id)
            return False
        return len(group.members) - 1 <= self.ctx.config.max_size

    def upgrade(self, classic: Group, topics: TopicsSnapshot) -> bool:
        """Start turning a classic group with members into a consumer group (Kafka's convertToConsumerGroup):
        the consumer group is installed for the heartbeat to work on; the classic group is left as it is until
        the records are committed (:meth:`finish_upgrade`), and a failed append drops the consumer group."""
        try:
            group = to_consumer_group(classic, topics)
        except (ConsumerProtocolError, KeyError, IndexError) as exc:
            log.warning("cannot upgrade classic group %s to a consumer group: %s", classic.group_id, exc)
            return False
        self.ctx.consumer.groups[classic.group_id] = group
        return True

    def finish_upgrade(self, classic: Group, group: ConsumerGroupState) -> None:
        """The conversion is committed: members waiting in the classic rebalance are told to rejoin, which the
        consumer group then serves; the classic group keeps only its committed offsets."""
        now = self.ctx.now()
        for member in classic.members.values():
            resolve(member.join_waiter, join_error(member.member_id, ErrorCode.rebalance_in_progress))
            resolve(member.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
            member.join_waiter = member.sync_waiter = None
        self.classic.forget_rebalance(classic)
        classic.clear_members(now)
        log.info("upgraded classic group %s (generation %d, %d members) to a consumer group",
                 classic.group_id, group.group_epoch, len(group.members))

    async def downgrade(self, group: ConsumerGroupState, leaving: str) -> ErrorCode:
        """The last consumer-protocol member leaves a group of classic members: it becomes a classic group at
        the group epoch, each member holding its target assignment, and rebalances (Kafka's
        convertToClassicGroup). The consumer group's records are tombstoned with the classic record after
        them, in one batch; memory changes only once that batch is committed. The caller holds the lock."""
        group_id = group.group_id
        members = to_classic_members(group, leaving)
        now = self.ctx.now()
        scratch = Group(group_id)
        scratch.adopt_members(group.group_epoch, members, now)
        value = scratch.to_value({m.member_id: m.assignment for m in members}, now)
        records: Records = [(k, None) for k in self.ctx.consumer_committed.get(group_id, {})]
        records.append((encode_key(GroupKey(group_id)), encode_group_value(value)))

        def replay() -> None:
            if self.ctx.consumer.groups.get(group_id) is not group:
                return
            del self.ctx.consumer.groups[group_id]
            self.ctx.replay_consumer(group_id, records)
            holder = self.ctx.groups.get(group_id)
            if holder is None:
                holder = self.ctx.groups[group_id] = Group(group_id, state_timestamp=now)
            holder.adopt_members(group.group_epoch, members, now)
            for member in members:
                self.classic.schedule_heartbeat(holder, member, member.session_timeout_ms)
            log.info("downgraded consumer group %s to a classic group (generation %d, %d members)",
                     group_id, holder.generation_id, len(members))
            self.classic.prepare_rebalance(holder, f"Downgrade group {group_id} from consumer to classic.")
            self.ctx.fire_due(now)

        return group_error(await self.ctx.runtime.write(self.ctx.partition_for(group_id), records, replay))
