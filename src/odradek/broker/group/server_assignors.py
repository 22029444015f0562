"""KIP-848's server-side assignors, ``uniform`` and ``range``, as the group coordinator runs them.

The broker computes a consumer group's target assignment itself whenever the group epoch moves. Both assignors are
sticky: a partition stays with its previous target owner while that member still subscribes to its topic and is
under its quota, so a member joining or leaving moves as few partitions as Kafka's assignors move.

``uniform`` balances the total partition count across members (Kafka's UniformAssignor: its optimized path for
homogeneous subscriptions, a greedy least-loaded fill for heterogeneous ones). ``range`` gives each member
subscribed to a topic a contiguous share of it, members in member-id order, the first ``P % M`` one extra
(Kafka's server-side RangeAssignor, co-partitioning topics with equal partition counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

Assignment = dict[str, dict[str, frozenset[int]]]
"""member id → topic name → partitions."""


@dataclass(frozen=True, slots=True)
class AssignmentSpec:
    """What an assignor sees: each member's resolved subscription, the topics' partition counts, and the
    previous target assignment (for stickiness)."""

    subscriptions: Mapping[str, frozenset[str]]
    partition_counts: Mapping[str, int]
    previous: Mapping[str, Mapping[str, frozenset[int]]]


def uniform(spec: AssignmentSpec) -> Assignment:
    """Balance partitions across members by total count, keeping previous owners where quota allows."""
    members = sorted(spec.subscriptions)
    result: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    if not members:
        return {}
    topics = sorted({t for s in spec.subscriptions.values() for t in s if t in spec.partition_counts})
    eligible = {t: [m for m in members if t in spec.subscriptions[m]] for t in topics}
    total = sum(spec.partition_counts[t] for t in topics)
    homogeneous = len({spec.subscriptions[m] & set(topics) for m in members}) == 1
    load = dict.fromkeys(members, 0)
    # Quotas: homogeneous groups get floor/ceil of total/members; heterogeneous ones cap at the ceiling of each
    # member's fair share among the members it competes with, and a least-loaded pass balances the rest.
    n = len(members)
    base, extra = divmod(total, n)
    ceiling = base + (1 if extra else 0)
    unassigned: list[tuple[str, int]] = []
    extras_used = 0
    for t in topics:
        for p in range(spec.partition_counts[t]):
            owner = next((m for m in eligible[t] if p in spec.previous.get(m, {}).get(t, ())), None)
            if owner is not None and load[owner] < base:
                result[owner].setdefault(t, set()).add(p)
                load[owner] += 1
            elif owner is not None and homogeneous and load[owner] < ceiling and extras_used < extra:
                result[owner].setdefault(t, set()).add(p)
                load[owner] += 1
                extras_used += 1
            elif owner is not None and not homogeneous and load[owner] < ceiling:
                result[owner].setdefault(t, set()).add(p)
                load[owner] += 1
            else:
                unassigned.append((t, p))
    # Partitions with the fewest possible owners go first, so the flexible ones can even out the load.
    unassigned.sort(key=lambda tp: (len(eligible[tp[0]]), tp))
    for t, p in unassigned:
        candidates = eligible[t]
        if not candidates:
            continue
        target = min(candidates, key=lambda m: (load[m], m))
        result[target].setdefault(t, set()).add(p)
        load[target] += 1
    return {m: {t: frozenset(ps) for t, ps in by.items()} for m, by in result.items()}


def range_(spec: AssignmentSpec) -> Assignment:
    """Contiguous ranges per topic over the subscribed members in member-id order."""
    members = sorted(spec.subscriptions)
    result: dict[str, dict[str, frozenset[int]]] = {m: {} for m in members}
    for t in sorted({t for s in spec.subscriptions.values() for t in s}):
        count = spec.partition_counts.get(t)
        if not count:
            continue
        subscribed = [m for m in members if t in spec.subscriptions[m]]
        per, extra = divmod(count, len(subscribed))
        start = 0
        for i, m in enumerate(subscribed):
            size = per + (1 if i < extra else 0)
            if size:
                result[m][t] = frozenset(range(start, start + size))
            start += size
    return result


ASSIGNORS = {"uniform": uniform, "range": range_}
"""The assignors by the names ``group.consumer.assignors`` and ConsumerGroupHeartbeat's server_assignor use."""
