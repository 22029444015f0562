"""Kafka's ``StickyAssignor`` and ``CooperativeStickyAssignor`` (``AbstractStickyAssignor`` and its
subclasses).

Both keep as much of each member's previous assignment as balance allows.  The eager one learns the previous
assignment from user data; the cooperative one from owned partitions, and additionally withholds any partition
that changes owner so that it is revoked in one rebalance and assigned in the next.
"""

from __future__ import annotations

from collections.abc import Mapping

from .assignor_base import Assignor, PartitionsPerTopic, normalize_topics
from .model import Subscription, TopicPartition, gc_paused
from .sticky_constrained import constrained_assign
from .sticky_general import GeneralBuilder
from .sticky_state import StickyState
from .sticky_userdata import (
    decode_cooperative_user_data,
    decode_sticky_user_data_ids,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)

__all__ = ["CooperativeStickyAssignor", "StickyAssignor"]

DEFAULT_GENERATION = -1


class _AbstractStickyAssignor(Assignor):
    """The shared algorithm; subclasses say where a member's previous partitions and generation come from."""

    def __init__(self, prefer_rack_aware_logic: bool = False) -> None:
        super().__init__(prefer_rack_aware_logic)
        #: Kafka's ``maxGeneration``: instance state that only grows across calls on the same assignor.
        self.max_generation = DEFAULT_GENERATION
        #: Kafka's ``partitionsTransferringOwnership``: ``{}`` after the constrained path, None after the general one.
        self.partitions_transferring_ownership: dict[TopicPartition, str] | None = {}
        # Only the verdict is kept, not the builder: the assignor must not pin a call's million-partition state.
        self._sticky = True
        #: True after a call on which Kafka's rebalancing loop would never have ended (see
        #: ``sticky_general.GeneralBuilder._perform_reassignments``); the result is then valid and balanced, but not
        #: Kafka's (there is none) and possibly not sticky in Kafka's ``isSticky`` sense.
        self.rebalance_loop_bounded = False

    def _member_data(self, state: StickyState, sub: Subscription) -> tuple[list[int], int | None]:
        raise NotImplementedError

    def is_sticky(self) -> bool:
        """Kafka's ``isSticky()``: no partition moved both ways between two members (general path)."""
        return self._sticky

    def assign(
        self, partitions_per_topic: PartitionsPerTopic, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        with gc_paused():
            return self._assign(partitions_per_topic, subscriptions)

    def _assign(
        self, partitions_per_topic: PartitionsPerTopic, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        member_ids = list(subscriptions)
        if not member_ids:  # Kafka takes the constrained path with nobody to assign to
            self.partitions_transferring_ownership = {}
            self._sticky = True
            return {}
        subs = [subscriptions[m] for m in member_ids]
        state = StickyState(normalize_topics(partitions_per_topic), member_ids, subs, self.prefer_rack_aware_logic)
        member_data = [self._member_data(state, sub) for sub in subs]
        owned, multi_owned, all_equal = self._all_subscriptions_equal(state, member_data)
        self._sticky = True
        self.rebalance_loop_bounded = False
        if all_equal:
            transferring: dict[int, int] = {}
            dealt, as_objects = constrained_assign(state, owned, multi_owned, transferring)
            tps = state.tps
            self.partitions_transferring_ownership = {tps[g]: member_ids[m] for g, m in transferring.items()}
            if as_objects:
                return dict(zip(member_ids, dealt, strict=True))
            result = dealt
        else:
            self.partitions_transferring_ownership = None
            prev = self._previous_assignment(member_data)
            builder = GeneralBuilder(state, owned, prev)
            built = builder.build()
            self._sticky = builder.movements.is_sticky()
            self.rebalance_loop_bounded = builder.loop_bounded
            result = [built[m] for m in range(len(member_ids))]
        tps = state.tps if state.total else []
        return {m: list(map(tps.__getitem__, result[i])) for i, m in enumerate(member_ids)}

    def _all_subscriptions_equal(
        self, state: StickyState, member_data: list[tuple[list[int], int | None]]
    ) -> tuple[list[list[int]], set[int], bool]:
        subs = state.subs
        equal = True
        subscribed: set[str] = set()
        owned: list[list[int]] = [[] for _ in subs]
        claimant: dict[int, int] = {}
        multi: set[int] = set()
        # Claims only conflict when some partition is claimed twice; checking that in bulk skips the per-partition
        # bookkeeping for the usual case (a million partitions in Kafka's largest test).
        claimed = sum(len(parts) for parts, _ in member_data)
        no_conflicts = len(set().union(*(parts for parts, _ in member_data))) == claimed if claimed else True
        for m, sub in enumerate(subs):
            if not subscribed:
                subscribed = set(sub.topics)
            elif equal and not (len(sub.topics) == len(subscribed) and subscribed.issuperset(sub.topics)):
                equal = False
            parts, generation = member_data[m]
            gen = DEFAULT_GENERATION if generation is None else generation
            if gen > self.max_generation:
                self.max_generation = gen
            if no_conflicts:
                owned[m] = list(parts)
                continue
            mine = owned[m]
            for g in parts:
                other = claimant.get(g)
                if other is None:
                    mine.append(g)
                    claimant[g] = m
                    continue
                other_gen = subs[other].generation_id
                if other_gen is None:
                    other_gen = DEFAULT_GENERATION
                if gen == other_gen:
                    multi.add(g)
                    _remove_silently(owned[other], g)
                    claimant[g] = m
                elif gen > other_gen:
                    mine.append(g)
                    _remove_silently(owned[other], g)
                    claimant[g] = m
        return owned, multi, equal

    def _previous_assignment(self, member_data: list[tuple[list[int], int | None]]) -> dict[int, tuple[int, int]]:
        prev: dict[int, tuple[int, int]] = {}
        max_gen = self.max_generation
        for m, (parts, generation) in enumerate(member_data):
            if generation is not None and generation < max_gen:
                gen = generation
            elif generation is None and max_gen > DEFAULT_GENERATION:
                gen = DEFAULT_GENERATION
            else:
                continue
            for g in parts:
                held = prev.get(g)
                if held is None or gen > held[1]:
                    prev[g] = (m, gen)
        return prev


def _remove_silently(parts: list[int], g: int) -> None:
    try:
        parts.remove(g)
    except ValueError:
        pass


class StickyAssignor(_AbstractStickyAssignor):
    """Kafka's eager ``sticky`` assignor: previous assignment and generation come from user data."""

    name = "sticky"

    encode_user_data = staticmethod(encode_sticky_user_data)

    def _member_data(self, state: StickyState, sub: Subscription) -> tuple[list[int], int | None]:
        return decode_sticky_user_data_ids(sub.user_data, state.topic_bytes_index)


class CooperativeStickyAssignor(_AbstractStickyAssignor):
    """Kafka's ``cooperative-sticky`` assignor: owned partitions and generation (field or user data)."""

    name = "cooperative-sticky"

    encode_user_data = staticmethod(encode_cooperative_user_data)

    def _member_data(self, state: StickyState, sub: Subscription) -> tuple[list[int], int | None]:
        if sub.generation_id is not None:
            return state.ids_of(sub.owned_partitions), sub.generation_id
        return state.ids_of(sub.owned_partitions), decode_cooperative_user_data(sub.user_data)

    def assign(
        self, partitions_per_topic: PartitionsPerTopic, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, list[TopicPartition]]:
        with gc_paused():
            assignment = self._assign(partitions_per_topic, subscriptions)
            transferring = self.partitions_transferring_ownership
            if transferring is None:
                transferring = _compute_transferring(subscriptions, assignment)
            for tp, member in transferring.items():
                assignment[member].remove(tp)
            return assignment


def _compute_transferring(
    subscriptions: Mapping[str, Subscription], assignment: dict[str, list[TopicPartition]]
) -> dict[TopicPartition, str]:
    """Partitions newly given to a member that some member must first revoke."""
    revoked: set[TopicPartition] = set()
    for member, assigned in assignment.items():
        owned = subscriptions[member].owned_partitions
        if owned:
            revoked.update(set(owned).difference(assigned))
    if not revoked:
        return {}
    transferring: dict[TopicPartition, str] = {}
    for member, assigned in assignment.items():
        owned_set = set(subscriptions[member].owned_partitions)
        for tp in assigned:
            if tp in revoked and tp not in owned_set:
                transferring[tp] = member
    return transferring
