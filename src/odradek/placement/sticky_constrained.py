"""Kafka's constrained sticky builder, used when every member subscribes to the same topics.

Members keep up to their quota of owned partitions (lowest partition numbers first, KAFKA-16277), then the
unassigned partitions are dealt round-robin to members under the minimum quota and finally one each to members
at exactly the minimum.  The round-robin is done a whole round at a time with list slices, which is what lets
a million partitions be dealt in well under a second.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from itertools import compress
from typing import Any

from .sticky_state import StickyState

__all__ = ["AssignmentError", "constrained_assign"]

_INVERT = bytes([1, 0]) + bytes(254)  # bytes.translate table flipping a 0/1 mark


class AssignmentError(RuntimeError):
    """Kafka's ``IllegalStateException`` from the constrained builder: quotas cannot be met."""


def constrained_assign(
    state: StickyState, owned: list[list[int]], multi_owned: set[int], transferring: dict[int, int]
) -> tuple[list[list[Any]], bool]:
    """Assignment per member index, and whether it already holds ``TopicPartition`` objects.

    Fills ``transferring`` (partition id -> new member) as Kafka's ``partitionsTransferringOwnership``.  From
    scratch (nothing owned, no racks) the partitions are dealt as ``state.tps`` objects directly: slicing that list
    is three times cheaper than mapping ids to objects afterwards, which matters at a million partitions.
    """
    n_members = len(owned)
    total = state.total
    min_q = total // n_members
    max_q = -(-total // n_members)
    expected_over = total % n_members
    cur_over = 0
    assignment: list[list[Any]] = [[] for _ in range(n_members)]
    maybe_revoked: dict[int, int] = {}
    under: list[int] = []
    exact: list[int] = []
    assigned_mark = bytearray(total)
    any_assigned = False
    rack_aware = state.rack_aware
    pt_key = state.partition_topic_key if any(len(p) > 1 for p in owned) else []

    for m in range(n_members):
        parts = owned[m]
        if rack_aware and parts:
            kept = []
            for g in parts:
                if state.racks_mismatch(m, g):
                    maybe_revoked[g] = m
                else:
                    kept.append(g)
            parts = kept
        if len(parts) > 1:
            ranks = list(map(pt_key.__getitem__, parts))
            if ranks != sorted(ranks):
                parts = sorted(parts, key=pt_key.__getitem__)
        if multi_owned and parts:
            parts = _remove_first_occurrences(parts, multi_owned)
        if len(parts) < min_q:
            keep = parts
            under.append(m)
        elif len(parts) >= max_q and cur_over < expected_over:
            cur_over += 1
            if cur_over == expected_over:
                exact.clear()
            keep = parts[:max_q]
            for g in parts[max_q:]:
                maybe_revoked[g] = m
        else:
            keep = parts[:min_q]
            for g in parts[min_q:]:
                maybe_revoked[g] = m
            if cur_over < expected_over:
                exact.append(m)
        if keep:
            assignment[m].extend(keep)
            any_assigned = True
            for g in keep:
                assigned_mark[g] = 1

    from_scratch = not any_assigned and not maybe_revoked and not multi_owned and state.consumers_on_racks is None
    unassigned: list[Any]
    if from_scratch:
        unassigned = state.tps  # no rack sort applies: no consumer has a rack
    elif any_assigned:
        unassigned = list(compress(range(total), assigned_mark.translate(_INVERT)))
        unassigned = state.sort_by_rack_consumers(unassigned)
    else:
        unassigned = state.sort_by_rack_consumers(list(range(total)))
    keys = state.member_keys
    under.sort(key=keys.__getitem__)
    exact.sort(key=keys.__getitem__)

    def note_new(g: int, m: int) -> None:
        prev = maybe_revoked.get(g)
        if (prev is not None and prev != m) or g in multi_owned:
            transferring[g] = m

    if rack_aware:
        unassigned, cur_over = _rack_aware_round_robin(
            state, unassigned, under, exact, assignment, min_q, max_q, cur_over, expected_over, note_new
        )
    cur_over = _round_robin(
        unassigned,
        under,
        exact,
        assignment,
        min_q,
        max_q,
        cur_over,
        note_new if (maybe_revoked or multi_owned) else None,
    )
    if under:
        if cur_over != expected_over:
            raise AssignmentError(
                "We haven't reached the expected number of members with more than the minQuota "
                "partitions, but no more partitions to be assigned"
            )
        for m in under:
            if len(assignment[m]) != min_q:
                raise AssignmentError(
                    f"Consumer: [{state.member_ids[m]}] doesn't reach minQuota partitions, and "
                    "no more partitions to be assigned"
                )
    return assignment, from_scratch


def _remove_first_occurrences(parts: list[int], doomed: set[int]) -> list[int]:
    seen: set[int] = set()
    out = []
    for g in parts:
        if g in doomed and g not in seen:
            seen.add(g)
            continue
        out.append(g)
    return out


def _rack_aware_round_robin(
    state: StickyState,
    unassigned: list[Any],
    under: list[int],
    exact: list[int],
    assignment: list[list[Any]],
    min_q: int,
    max_q: int,
    cur_over: int,
    expected_over: int,
    note_new: Callable[[int, int], None],
) -> tuple[list[Any], int]:
    """Kafka's ``assignRackAwareRoundRobin``: rack-matching members first; returns what is left unassigned."""
    remaining: list[int] = []
    next_index = 0
    for g in unassigned:
        member = None
        idx = state.next_rack_consumer(g, under, next_index)
        if idx >= 0:
            member = under[idx]
            count = len(assignment[member]) + 1
            if count >= min_q:
                under.remove(member)
                if count < max_q and cur_over < expected_over:
                    exact.append(member)
            else:
                idx += 1
            next_index = 0 if not under else idx % len(under)
        elif exact:
            first = state.next_rack_consumer(g, exact, 0)
            if first >= 0:
                member = exact[first]
                if len(assignment[member]) + 1 == max_q:
                    del exact[first]
                    cur_over += 1
                    if cur_over == expected_over:
                        exact.clear()
        if member is None:
            remaining.append(g)
        else:
            assignment[member].append(g)
            note_new(g, member)
    return remaining, cur_over


def _round_robin(
    unassigned: list[Any],
    under: list[int],
    exact: list[int],
    assignment: list[list[Any]],
    min_q: int,
    max_q: int,
    cur_over: int,
    note_new: Callable[[int, int], None] | None,
) -> int:
    """Kafka's ``assignRoundRobin``, a whole round of the member iterator at a time where possible."""
    exact_q = deque(exact)
    exact.clear()
    pos = 0
    total = len(unassigned)
    it = 0  # the iterator's cursor into ``under``; 0 means a fresh iterator
    while pos < total:
        k = len(under)
        if k and it == 0:
            need = min(min_q - len(assignment[m]) for m in under)
            rounds = min(need, (total - pos) // k)
            if rounds >= 1:
                end = pos + rounds * k
                for i, m in enumerate(under):
                    chunk = unassigned[pos + i : end : k]
                    assignment[m].extend(chunk)
                    if note_new is not None:
                        for g in chunk:
                            note_new(g, m)
                pos = end
                done = [m for m in under if len(assignment[m]) == min_q]
                if done:
                    under[:] = [m for m in under if len(assignment[m]) != min_q]
                    exact_q.extend(done)
                continue
        g = unassigned[pos]
        pos += 1
        from_iterator = True
        if it < k:
            member = under[it]
            it += 1
        elif k == 0:
            if not exact_q:
                raise RuntimeError("No more unfilled consumers to be assigned.")
            member = exact_q.popleft()
            from_iterator = False
        else:
            member = under[0]
            it = 1
        assignment[member].append(g)
        if note_new is not None:
            note_new(g, member)
        count = len(assignment[member])
        if count == min_q and from_iterator:
            it -= 1
            del under[it]
            exact_q.append(member)
        elif count == max_q:
            cur_over += 1
        if it >= len(under):
            it = 0  # an exhausted iterator restarts on the next partition, just like a fresh one
    return cur_over
