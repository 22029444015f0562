"""The general sticky builder's fast paths against the literal Kafka procedure they replace."""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.placement import Subscription, sticky_general
from odradek.placement.assignor_base import normalize_topics
from odradek.placement.sticky_general import GeneralBuilder
from odradek.placement.sticky_state import StickyState


@st.composite
def builders(draw):  # type: ignore[no-untyped-def]
    n_topics = draw(st.integers(1, 8))
    topics = {f"t{i}": draw(st.integers(1, 40)) for i in range(n_topics)}
    names = list(topics)
    n_members = draw(st.integers(1, 30))
    members = [draw(st.text("abcxyz", min_size=1, max_size=4)) + f"-{i}" for i in range(n_members)]
    subs = [
        Subscription(draw(st.lists(st.sampled_from(names), min_size=1, max_size=n_topics, unique=True)))
        for _ in members
    ]
    state = StickyState(normalize_topics(topics), members, subs, False)
    # some members already hold some partitions of their topics (as after assignOwnedPartitions)
    owned: list[list[int]] = [[] for _ in members]
    taken: set[int] = set()
    for m, sub in enumerate(subs):
        for topic in sub.topics:
            r = state.rank[topic]
            for p in range(state.topic_counts[r]):
                g = state.base[r] + p
                if g not in taken and draw(st.integers(0, 9)) == 0:
                    owned[m].append(g)
                    taken.add(g)
    builder = GeneralBuilder(state, owned, {})
    for m in builder.cur:
        builder._add(m)
    unassigned = [g for g in builder.sorted_all if g not in taken]
    return builder, unassigned


@settings(max_examples=80, deadline=None)
@given(builders())
def test_level_dealing_picks_what_the_treeset_scan_picks(built) -> None:  # type: ignore[no-untyped-def]
    builder, unassigned = built
    literal = copy.deepcopy(builder)
    literal._maybe_assign(list(unassigned), rack=False)
    builder._maybe_assign_by_topic(list(unassigned))
    assert builder.cur == literal.cur
    assert builder.owner == literal.owner
    assert builder.entries == literal.entries


def test_scaled_down_kafka_shapes_match_the_literal_procedure() -> None:
    """Kafka's non-equal shapes (all-but-one on every topic; member i on topics 0..i%T), scaled down so the literal
    TreeSet scan is affordable, give identical assignments through the fast path."""
    n_topics, n_partitions, n_members = 12, 30, 60
    topics = {f"t{i:03d}": n_partitions for i in range(n_topics)}
    names = list(topics)
    shapes = {
        "non-equal": [names] * (n_members - 1) + [names[:1]],
        "i%T": [names[: i % n_topics + 1] for i in range(n_members)],
    }
    for label, subscriptions in shapes.items():
        members = [f"c{i:04d}" for i in range(n_members)]
        subs = [Subscription(ts) for ts in subscriptions]
        results = []
        for literal in (False, True):
            state = StickyState(normalize_topics(topics), members, subs, False)
            builder = GeneralBuilder(state, [[] for _ in members], {})
            if literal:
                builder._maybe_assign_by_topic = lambda parts, b=builder: _literal(b, parts)  # type: ignore[method-assign]
            results.append(builder.build())
        assert results[0] == results[1], label


def _literal(builder: GeneralBuilder, partitions: list[int]) -> None:
    builder._maybe_assign(partitions, rack=False)


def _literal_is_balanced(builder: GeneralBuilder) -> bool:
    """Kafka's ``isBalanced`` as written: for each member in (size, id) order that could take more, look at every
    partition of its topics that it does not own and compare with that partition's owner."""
    entries = builder.entries
    if not entries or entries[0][0] >= entries[-1][0] - 1:
        return True
    s = builder.s
    owner = {g: m for m, parts in builder.cur.items() for g in parts}
    for _size, _key, m in entries:
        parts = builder.cur[m]
        count = len(parts)
        if count == builder.max_size[m]:
            continue
        mine = set(parts)
        for r in builder.consumer_topics[m]:
            for g in range(s.base[r], s.base[r] + s.topic_counts[r]):
                if g not in mine and count + 1 < len(builder.cur[owner[g]]):
                    return False
    return True


@settings(max_examples=int(os.environ.get("ODRADEK_DIFF_EXAMPLES", "60")), deadline=None)
@given(st.randoms(use_true_random=False))
def test_is_balanced_matches_kafkas_literal_check(rand) -> None:  # type: ignore[no-untyped-def]
    """Whole rebalances (members change subscriptions, previous assignment in user data) give the same result with
    the per-topic indexes and with Kafka's literal partition-by-partition checks."""
    from odradek.placement import StickyAssignor, encode_sticky_user_data

    n_topics = rand.randrange(2, 12)
    topics = {f"t{i:02d}": rand.randint(1, 12) for i in range(n_topics)}
    names = list(topics)
    members = {f"c{i:02d}": rand.sample(names, rand.randint(1, n_topics)) for i in range(rand.randrange(2, 25))}
    first = StickyAssignor().assign(topics, {m: Subscription(ts) for m, ts in members.items()})
    changed = {m: rand.sample(names, rand.randint(1, n_topics)) for m in members if rand.random() < 0.8}
    subs = {m: Subscription(ts, user_data=encode_sticky_user_data(first.get(m, []), 1)) for m, ts in changed.items()}
    if not subs:
        return
    fast = StickyAssignor().assign(topics, subs)
    with _literal_checks():
        literal = StickyAssignor().assign(topics, subs)
    assert fast == literal


@contextmanager
def _literal_checks() -> Iterator[None]:
    """Swap the per-topic indexes for Kafka's literal scans for the duration of the block."""
    original_check, original_index = GeneralBuilder._is_balanced, sticky_general._SubscriberIndex
    GeneralBuilder._is_balanced = _literal_is_balanced  # type: ignore[method-assign, assignment]
    sticky_general._SubscriberIndex = _ScanningSubscribers  # type: ignore[misc, assignment]
    try:
        yield
    finally:
        GeneralBuilder._is_balanced = original_check  # type: ignore[method-assign]
        sticky_general._SubscriberIndex = original_index  # type: ignore[misc]


class _ScanningSubscribers:
    """Kafka's scan over a topic's potential consumers, in place of the smallest-subscriber heap."""

    def __init__(self, cur: dict[int, list[int]], topic_consumers: list[list[int]]) -> None:
        self.cur, self.topic_consumers = cur, topic_consumers

    def smallest(self, t: int) -> int:
        return min((len(self.cur[m]) for m in self.topic_consumers[t] if m in self.cur), default=1 << 62)

    def resized(self, m: int, topics: set[int]) -> None:
        pass


def test_scaled_down_joins_match_the_literal_procedure() -> None:
    """A member on every topic joins the scaled-down non-equal shapes: many moves through the rebalancing loop,
    identical with the per-topic indexes and with Kafka's literal checks."""
    from odradek.placement import StickyAssignor, encode_sticky_user_data

    n_topics, n_partitions, n_members = 12, 30, 60
    topics = {f"t{i:03d}": n_partitions for i in range(n_topics)}
    names = list(topics)
    for subscriptions in (
        [names] * (n_members - 1) + [names[:1]],
        [names[: i % n_topics + 1] for i in range(n_members)],
    ):
        members = {f"c{i:04d}": ts for i, ts in enumerate(subscriptions)}
        first = StickyAssignor().assign(topics, {m: Subscription(ts) for m, ts in members.items()})
        subs = {m: Subscription(ts, user_data=encode_sticky_user_data(first[m], 1)) for m, ts in members.items()}
        subs["zz-joiner"] = Subscription(names)
        fast = StickyAssignor().assign(topics, subs)
        assert len(fast["zz-joiner"]) >= n_topics * n_partitions // (n_members + 1) - 1
        with _literal_checks():
            literal = StickyAssignor().assign(topics, subs)
        assert fast == literal
