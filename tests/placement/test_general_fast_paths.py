"""The general sticky builder's fast paths against the literal Kafka procedure they replace."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.placement import Subscription
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
