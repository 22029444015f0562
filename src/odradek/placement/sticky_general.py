"""Kafka's general sticky builder, used when members subscribe to different topics.

It keeps every still-valid owned partition, hands the rest one by one to the least-loaded eligible member, and
then moves partitions while the assignment is not balanced, preferring to give a partition back to its
previous owner and undoing earlier moves rather than chaining new ones (``PartitionMovements``) so the result
stays sticky. Kafka picks "the partition to move" from a ``HashSet`` in places; that set's Java iteration
order is emulated here.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from heapq import heapify, heappop, heappush
from itertools import repeat

from .java import string_hash
from .sticky_state import StickyState

__all__ = ["MOVE_BOUND_FACTOR", "PING_PONG_MOVES", "GeneralBuilder"]

#: Moves of one partition, and moves per reassignable partition, after which the rebalancing loop stops
#: substituting partitions (Kafka would loop forever there; see ``_perform_reassignments``).
PING_PONG_MOVES = 32
MOVE_BOUND_FACTOR = 10


class _JavaHashSet:
    """Iteration order of a ``java.util.HashSet<TopicPartition>``: by bucket of the spread hash code, then by
    insertion within a bucket; the table doubles past 3/4 full and never shrinks (treeified bins not modelled)."""

    __slots__ = ("_cap", "_items", "_seq")

    def __init__(self) -> None:
        self._cap = 16
        self._items: dict[int, int] = {}
        self._seq = 0

    def add(self, g: int) -> None:
        if g in self._items:
            return
        self._seq += 1
        self._items[g] = self._seq
        if len(self._items) > 0.75 * self._cap:
            self._cap <<= 1

    def remove(self, g: int) -> None:
        self._items.pop(g, None)

    def __len__(self) -> int:
        return len(self._items)

    def first(self, hash_of: dict[int, int]) -> int:
        """The element Java's ``iterator().next()`` returns; ``hash_of`` holds each element's hashCode."""
        mask = self._cap - 1
        return min(self._items, key=lambda g: ((hash_of[g] ^ (hash_of[g] >> 16)) & mask, self._items[g]))


class _Movements:
    """Kafka's ``PartitionMovements``: where each moved partition came from, per topic and member pair."""

    def __init__(self, state: StickyState) -> None:
        self.state = state
        self.by_topic: dict[int, dict[tuple[int, int], _JavaHashSet]] = {}
        self.moves: dict[int, tuple[int, int]] = {}
        self._hash: dict[int, int] = {}
        self._topic_hash: dict[int, int] = {}

    def _tp_hash(self, g: int) -> int:
        h = self._hash.get(g)
        if h is None:
            r = self.state.topic_of[g]
            th = self._topic_hash.get(r)
            if th is None:
                th = string_hash(self.state.topic_names[r])
                self._topic_hash[r] = th
            h = (31 * (31 + g - self.state.base[r]) + th) & 0xFFFFFFFF
            self._hash[g] = h
        return h

    def _remove_record(self, g: int) -> tuple[int, int]:
        pair = self.moves.pop(g)
        t = self.state.topic_of[g]
        per_topic = self.by_topic[t]
        per_topic[pair].remove(g)
        if not len(per_topic[pair]):
            del per_topic[pair]
        if not per_topic:
            del self.by_topic[t]
        return pair

    def _add_record(self, g: int, pair: tuple[int, int]) -> None:
        self.moves[g] = pair
        self._tp_hash(g)
        self.by_topic.setdefault(self.state.topic_of[g], {}).setdefault(pair, _JavaHashSet()).add(g)

    def move(self, g: int, old: int, new: int) -> None:
        if g in self.moves:
            src, _dst = self._remove_record(g)
            if src != new:
                self._add_record(g, (src, new))
        else:
            self._add_record(g, (old, new))

    def actual_partition_to_move(self, g: int, old: int, new: int) -> int:
        per_topic = self.by_topic.get(self.state.topic_of[g])
        if per_topic is None:
            return g
        if g in self.moves:
            old = self.moves[g][0]
        reverse = per_topic.get((new, old))
        if reverse is None:
            return g
        return reverse.first(self._hash)

    def is_sticky(self) -> bool:
        """No topic saw partitions move both ways between the same two members."""
        for per_topic in self.by_topic.values():
            pairs = set(per_topic)
            if any((b, a) in pairs for a, b in pairs):
                return False
        return True


class GeneralBuilder:
    """One run of Kafka's ``GeneralAssignmentBuilder`` over int partition ids and member indices."""

    def __init__(self, state: StickyState, owned: list[list[int]], prev: dict[int, tuple[int, int]]) -> None:
        self.s = state
        self.prev = prev
        n_members = len(state.member_ids)
        topic_of = state.topic_of
        counts = state.topic_counts
        n_topics = len(counts)
        self.topic_consumers: list[list[int]] = [[] for _ in range(n_topics)]
        self.consumer_topics: list[list[int]] = []
        self.consumer_topic_sets: list[set[int]] = []
        # Members with the same subscription share its topic list and set (Kafka's big groups have 2,000 members
        # on the same 500 topics), and join each topic's consumer list in one extend per group.
        groups: dict[tuple[str, ...], tuple[list[int], set[int], list[int]]] = {}
        for m, sub in enumerate(state.subs):
            key = tuple(sub.topics)
            group = groups.get(key)
            if group is None:
                ranks = [r for r in map(state.rank.get, key) if r is not None]
                group = (ranks, set(ranks), [])
                groups[key] = group
            group[2].append(m)
            self.consumer_topics.append(group[0])
            self.consumer_topic_sets.append(group[1])
        for ranks, _rank_set, members in groups.values():
            for r in ranks:
                self.topic_consumers[r].extend(members)
        self.cur: dict[int, list[int]] = {m: owned[m] for m in range(n_members)}
        self.owner: dict[int, int] = {}
        for m in range(n_members):
            self.owner.update(zip(owned[m], repeat(m)))
        topic_order = sorted(range(n_topics), key=lambda r: (len(self.topic_consumers[r]), state.topic_names[r]))
        self.sorted_all: list[int] = []
        for r in topic_order:
            self.sorted_all.extend(range(state.base[r], state.base[r] + counts[r]))
        self.topic_position = {r: i for i, r in enumerate(topic_order)}
        self.entries: list[tuple[int, str, int]] = []
        self.entry_of: dict[int, tuple[int, str, int]] = {}
        self.revocation_required = False
        self._owners: _OwnerIndex | None = None
        self._moves = 0
        self._move_counts: dict[int, int] = {}
        self._plain_moves = False
        self._subscribers: _SubscriberIndex | None = None
        self.movements = _Movements(state)
        self.max_size = [self._max_assignment_size(m) for m in range(n_members)]
        self._topic_of = topic_of

    # -- the TreeSet ordered by (assignment size, member id) --
    def _add(self, m: int) -> None:
        e = (len(self.cur[m]), self.s.member_keys[m], m)
        self.entry_of[m] = e
        insort(self.entries, e)

    def _remove(self, m: int) -> None:
        e = self.entry_of.pop(m, None)
        if e is not None:
            i = bisect_left(self.entries, e)
            del self.entries[i]

    def _max_assignment_size(self, m: int) -> int:
        topics = self.consumer_topics[m]
        if len(topics) == len(self.s.topic_counts):
            return self.s.total
        return sum(self.s.topic_counts[r] for r in topics)

    # -- build --
    def build(self) -> dict[int, list[int]]:
        assigned = self._assign_owned()
        if assigned:
            mark = set(assigned)
            unassigned = [g for g in self.sorted_all if g not in mark]
        else:
            unassigned = self.sorted_all
        for m in self.cur:
            self._add(m)
        self._balance(unassigned)
        return self.cur

    def _assign_owned(self) -> list[int]:
        s = self.s
        assigned: list[int] = []
        topic_of = s.topic_of
        for m, parts in self.cur.items():
            subscribed = s.subs[m].topic_set
            kept = []
            for g in parts:
                if s.topic_names[topic_of[g]] not in subscribed or s.racks_mismatch(m, g):
                    self.revocation_required = True
                else:
                    kept.append(g)
            if len(kept) != len(parts):
                parts[:] = kept
            assigned.extend(kept)
        return assigned

    def _maybe_assign(self, partitions: list[int], rack: bool) -> list[int]:
        """Kafka's ``maybeAssign``: each partition to the first eligible member in (size, id) order; returns the
        partitions left unassigned."""
        left = []
        topic_of = self._topic_of
        for g in partitions:
            t = topic_of[g]
            if not self.topic_consumers[t]:
                left.append(g)
                continue
            chosen = None
            for _size, _key, m in self.entries:
                if t in self.consumer_topic_sets[m] and not (rack and self.s.racks_mismatch(m, g)):
                    chosen = m
                    break
            if chosen is None:
                left.append(g)
                continue
            self._remove(chosen)
            self.cur[chosen].append(g)
            self.owner[g] = chosen
            self._add(chosen)
        return left

    def _maybe_assign_by_topic(self, partitions: list[int]) -> None:
        """The plain pass of ``maybeAssign``, a topic's run of partitions at a time.

        Kafka gives each partition to the first member, in (size, member id) order, subscribed to its topic.  While
        one topic's run is dealt only its subscribers change size, so the picks follow (level, member id) over the
        subscribers whose size has reached that level: whole levels are dealt with list slices.  Consecutive topics
        with the same subscribers reuse the order the previous run left; the global order is rebuilt at the end.
        """
        topic_of = self._topic_of
        cur = self.cur
        keys = self.s.member_keys
        n = len(partitions)
        i = 0
        previous: tuple[list[int], list[tuple[int, str, int]]] | None = None
        while i < n:
            t = topic_of[partitions[i]]
            j = i + 1
            while j < n and topic_of[partitions[j]] == t:
                j += 1
            subscribers = list(dict.fromkeys(self.topic_consumers[t]))
            if subscribers:
                if previous is not None and previous[0] == subscribers:
                    order = previous[1]
                else:
                    sizes = map(len, map(cur.__getitem__, subscribers))
                    order = sorted(zip(sizes, map(keys.__getitem__, subscribers), subscribers, strict=True))
                previous = (subscribers, self._deal_levels(partitions, i, j, order))
            i = j
        owner = self.owner
        for m, parts in cur.items():
            owner.update(zip(parts, repeat(m)))
        self.entries = sorted((len(cur[m]), keys[m], m) for m in cur)
        self.entry_of = {e[2]: e for e in self.entries}

    def _deal_levels(
        self, partitions: list[int], pos: int, end: int, order: list[tuple[int, str, int]]
    ) -> list[tuple[int, str, int]]:
        """Deal ``partitions[pos:end]`` to members sorted by (size, key); returns their new sorted order."""
        cur = self.cur
        eligible: list[tuple[str, int]] = []
        w = 0
        level = order[0][0]
        partial = 0
        while pos < end:
            if w < len(order) and order[w][0] <= level:
                v = bisect_left(order, (level + 1,), w)
                batch = [(key, m) for _size, key, m in order[w:v]]
                eligible = sorted(eligible + batch) if eligible else batch
                w = v
            k = len(eligible)
            levels = (end - pos) // k
            if w < len(order):
                levels = min(levels, order[w][0] - level)
            if levels == 0:
                partial = end - pos
                for offset in range(partial):
                    cur[eligible[offset][1]].append(partitions[pos + offset])
                break
            stop = pos + levels * k
            for r, (_key, m) in enumerate(eligible):
                cur[m].extend(partitions[pos + r : stop : k])
            pos = stop
            level += levels
        dealt = [(level, key, m) for key, m in eligible[partial:]]
        dealt += [(level + 1, key, m) for key, m in eligible[:partial]]
        return sorted(dealt + order[w:])

    def _balance(self, unassigned: list[int]) -> None:
        initializing = not self.cur[self.entries[-1][2]] if self.entries else True
        to_assign = unassigned
        if self.s.rack_aware:
            to_assign = self._maybe_assign(list(unassigned), rack=True)
        self._maybe_assign_by_topic(to_assign)

        fixed_topics = {r for r, cs in enumerate(self.topic_consumers) if len(cs) < 2}
        topic_of = self._topic_of
        if fixed_topics:
            self.sorted_all = [g for g in self.sorted_all if topic_of[g] not in fixed_topics]
            unassigned = [g for g in unassigned if topic_of[g] not in fixed_topics]
        fixed: dict[int, list[int]] = {}
        for m in list(self.cur):
            if not self._can_participate(m):
                self._remove(m)
                fixed[m] = self.cur.pop(m)
        snapshot = {m: list(parts) for m, parts in self.cur.items()}
        owner_snapshot = dict(self.owner)
        if not self.revocation_required:
            self._perform_reassignments(unassigned)
        performed = self._perform_reassignments(self.sorted_all)
        if not initializing and performed and _score(self.cur) >= _score(snapshot):
            for m in list(self.cur):
                self._remove(m)
            self.cur = snapshot
            self.owner = owner_snapshot
            self._owners = None
            self._subscribers = None
            for m in self.cur:
                self._add(m)
        for m, parts in fixed.items():
            self.cur[m] = parts
            self._add(m)

    def _can_participate(self, m: int) -> bool:
        parts = self.cur[m]
        if len(parts) < self.max_size[m]:
            return True
        topic_of = self._topic_of
        return any(len(self.topic_consumers[topic_of[g]]) >= 2 for g in parts)

    def _is_balanced(self) -> bool:
        """Kafka's ``isBalanced``, evaluated per topic instead of per partition.

        Kafka answers "unbalanced" when some member that could take more has a topic with a partition owned by a
        member holding at least two more partitions.  That is the case exactly when, for some subscribed topic, the
        largest owner of one of its partitions holds more than the member plus one (a member that owns everything
        it can never passes this test).  The largest owner per topic comes from :class:`_OwnerIndex`, updated
        move by move, so a check costs a few heap reads rather than a walk over every partition.
        """
        entries = self.entries
        largest = entries[-1][0] if entries else 0
        if not entries or entries[0][0] >= largest - 1:
            return True
        if self._owners is None:
            self._owners = _OwnerIndex(self.cur, self._topic_of)
        largest_owner = self._owners.largest_owner
        for size, _key, m in entries:
            if largest <= size + 1:
                return True  # sizes only grow from here on: nobody can be two partitions behind anyone
            if size == self.max_size[m]:
                continue
            for t in self.consumer_topic_sets[m]:
                if largest_owner(t) > size + 1:
                    return False
        return True

    def _perform_reassignments(self, partitions: list[int]) -> bool:
        """Kafka's ``performReassignments``, with one deliberate difference where Kafka never returns.

        Kafka's loop repeats while a pass moved anything, and ``PartitionMovements`` may answer a move by moving a
        partition back along an earlier chain (A->B->C makes "C gives to A" move A's old partition back from B).
        Some inputs then ping-pong one partition between two members forever: Kafka itself never returns there
        (librdkafka's line-by-line port hit the same, issue 4783).  Once a partition has moved
        ``PING_PONG_MOVES`` times (or the moves exceed ``MOVE_BOUND_FACTOR`` per partition) this builder stops
        substituting partitions and moves the chosen partition itself; every such move takes from a member at
        least two larger than the receiver, so the loop then ends, balanced.
        """
        performed = False
        topic_of = self._topic_of
        cur = self.cur
        s = self.s
        budget = MOVE_BOUND_FACTOR * len(partitions) + 1000
        while True:
            modified = False
            for g in partitions:
                if self._is_balanced():
                    break
                if self._moves > budget:
                    self._plain_moves = True
                t = topic_of[g]
                c = self.owner.get(g)
                if c is None or c not in cur:
                    continue
                prev = self.prev.get(g)
                if prev is not None and prev[0] in cur and len(cur[c]) > len(cur[prev[0]]) + 1:
                    self._reassign(g, prev[0])
                    performed = modified = True
                    continue
                found = False
                rack = s.consumer_rack[c]
                if rack is not None and s.partition_racks is not None:
                    racks = s.partition_racks[g]
                    if racks and rack in racks:
                        for o in self.topic_consumers[t]:
                            orack = s.consumer_rack[o]
                            if orack is None or orack not in racks or o not in cur:
                                continue
                            if len(cur[c]) > len(cur[o]) + 1:
                                self._reassign_to_least_loaded(g)
                                performed = modified = found = True
                                break
                if not found:
                    # Kafka scans the topic's subscribers for one holding two fewer partitions than the owner; the
                    # smallest subscriber answers that at once.
                    if self._subscribers is None:
                        self._subscribers = _SubscriberIndex(cur, self.topic_consumers)
                    if len(cur[c]) > self._subscribers.smallest(t) + 1:
                        self._reassign_to_least_loaded(g)
                        performed = modified = True
            if not modified:
                return performed

    def _reassign_to_least_loaded(self, g: int) -> None:
        t = self._topic_of[g]
        for _size, _key, m in self.entries:
            if t in self.consumer_topic_sets[m]:
                self._reassign(g, m)
                return

    @property
    def loop_bounded(self) -> bool:
        """Whether the ping-pong guard of ``_perform_reassignments`` took over (Kafka would not have returned)."""
        return self._plain_moves

    def _reassign(self, g: int, new: int) -> None:
        old = self.owner[g]
        moved = g if self._plain_moves else self.movements.actual_partition_to_move(g, old, new)
        self._process_move(moved, new)

    def _process_move(self, g: int, new: int) -> None:
        self._moves += 1
        count = self._move_counts.get(g, 0) + 1
        self._move_counts[g] = count
        if count > PING_PONG_MOVES:
            self._plain_moves = True
        old = self.owner[g]
        self._remove(old)
        self._remove(new)
        self.movements.move(g, old, new)
        self.cur[old].remove(g)
        self.cur[new].append(g)
        self.owner[g] = new
        self._add(new)
        self._add(old)
        if self._owners is not None:
            self._owners.moved(self._topic_of[g], old, new)
        if self._subscribers is not None:
            self._subscribers.resized(old, self.consumer_topic_sets[old])
            self._subscribers.resized(new, self.consumer_topic_sets[new])


class _OwnerIndex:
    """For every topic, the size of the largest member owning one of its partitions, kept up to date per move.

    Per member, how many partitions of each topic it owns; per topic, a max-heap of (size, member) entries that
    goes stale lazily: an entry counts only while the member still owns a partition of the topic and still has that
    size.  A move pushes fresh entries for the two members whose sizes changed, in the topics they own.
    """

    def __init__(self, cur: dict[int, list[int]], topic_of: list[int]) -> None:
        self.cur = cur
        self.per_member: dict[int, dict[int, int]] = {}
        heaps: dict[int, list[tuple[int, int]]] = {}
        for m, parts in cur.items():
            counts: dict[int, int] = {}
            for g in parts:
                t = topic_of[g]
                counts[t] = counts.get(t, 0) + 1
            self.per_member[m] = counts
            entry = (-len(parts), m)
            for t in counts:
                heaps.setdefault(t, []).append(entry)
        for heap in heaps.values():
            heapify(heap)
        self.heaps = heaps

    def largest_owner(self, t: int) -> int:
        heap = self.heaps.get(t)
        while heap:
            neg_size, m = heap[0]
            counts = self.per_member.get(m)
            if counts is not None and counts.get(t) and len(self.cur[m]) == -neg_size:
                return -neg_size
            heappop(heap)
        return 0

    def moved(self, t: int, old: int, new: int) -> None:
        old_counts = self.per_member[old]
        left = old_counts[t] - 1
        if left:
            old_counts[t] = left
        else:
            del old_counts[t]
        new_counts = self.per_member[new]
        new_counts[t] = new_counts.get(t, 0) + 1
        for m, counts in ((old, old_counts), (new, new_counts)):
            entry = (-len(self.cur[m]), m)
            for topic in counts:
                heappush(self.heaps.setdefault(topic, []), entry)


class _SubscriberIndex:
    """For every topic, the size of its smallest subscriber (among members taking part in balancing).

    A min-heap of (size, member) per topic whose entries go stale lazily, refreshed for the two members a move
    resizes; it answers Kafka's "is some subscriber two partitions behind this owner" without a scan.
    """

    def __init__(self, cur: dict[int, list[int]], topic_consumers: list[list[int]]) -> None:
        self.cur = cur
        self.heaps: list[list[tuple[int, int]]] = []
        for members in topic_consumers:
            heap = [(len(cur[m]), m) for m in dict.fromkeys(members) if m in cur]
            heapify(heap)
            self.heaps.append(heap)

    def smallest(self, t: int) -> int:
        heap = self.heaps[t]
        cur = self.cur
        while heap:
            size, m = heap[0]
            parts = cur.get(m)
            if parts is not None and len(parts) == size:
                return size
            heappop(heap)
        return 1 << 62  # nobody to give to

    def resized(self, m: int, topics: set[int]) -> None:
        entry = (len(self.cur[m]), m)
        for t in topics:
            heappush(self.heaps[t], entry)


def _score(assignment: dict[int, list[int]]) -> int:
    """Kafka's balance score: the sum over unordered member pairs of the difference of their sizes."""
    sizes = sorted(len(p) for p in assignment.values())
    score = 0
    running = 0
    for i, s in enumerate(sizes):
        score += s * i - running
        running += s
    return score
