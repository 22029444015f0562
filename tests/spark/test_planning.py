"""Offset planning rules, without a cluster: bounds, admission control, splitting, data loss."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.spark.options import OffsetBound, OptionError
from odradek.spark.planning import (
    DataLossError,
    OffsetRange,
    clamp_to_available,
    from_json,
    plan_ranges,
    rate_limit,
    resolve_bound,
    split_ranges,
    to_json,
)

A0, A1 = ("a", 0), ("a", 1)
EARLIEST = {A0: 5, A1: 0}
LATEST = {A0: 50, A1: 20}


def _no_times(_wanted):
    raise AssertionError("not a timestamp bound")


def test_offsets_json_round_trips_with_string_partition_keys() -> None:
    offsets = {A0: 3, A1: 9, ("b", 2): 0}
    assert to_json(offsets) == {"a": {"0": 3, "1": 9}, "b": {"2": 0}}
    assert from_json(to_json(offsets)) == offsets
    assert from_json('{"a": {"0": 3}}') == {A0: 3}


def test_resolve_earliest_latest_and_explicit_offsets() -> None:
    assert resolve_bound(OffsetBound("earliest"), [A0, A1], EARLIEST, LATEST, _no_times) == EARLIEST
    assert resolve_bound(OffsetBound("latest"), [A0, A1], EARLIEST, LATEST, _no_times) == LATEST
    explicit = OffsetBound("offsets", offsets={A0: -2, A1: -1})
    assert resolve_bound(explicit, [A0, A1], EARLIEST, LATEST, _no_times) == {A0: 5, A1: 20}
    with pytest.raises(OptionError, match="every partition"):
        resolve_bound(OffsetBound("offsets", offsets={A0: 7}), [A0, A1], EARLIEST, LATEST, _no_times)


def test_resolve_timestamps_and_the_no_match_strategy() -> None:
    def lookup(wanted):
        assert wanted == {A0: 1000, A1: 1000}
        return {A0: 12, A1: -1}

    bound = OffsetBound("timestamp", timestamp=1000)
    with pytest.raises(OptionError, match="no offset"):
        resolve_bound(bound, [A0, A1], EARLIEST, LATEST, lookup)
    assert resolve_bound(bound, [A0, A1], EARLIEST, LATEST, lookup, timestamp_strategy="latest") == {A0: 12, A1: 20}


def test_rate_limit_is_proportional_and_exact() -> None:
    start = {A0: 0, A1: 0}
    assert rate_limit(start, {A0: 30, A1: 10}, 100) == {A0: 30, A1: 10}
    assert rate_limit(start, {A0: 30, A1: 10}, 20) == {A0: 15, A1: 5}
    three = {A0: 0, A1: 0, ("b", 0): 0}
    assert sum(rate_limit(three, {A0: 10, A1: 10, ("b", 0): 10}, 10).values()) == 10


@given(
    sizes=st.lists(st.integers(0, 1000), min_size=1, max_size=8),
    limit=st.integers(1, 3000),
)
def test_rate_limit_never_exceeds_limit_or_available(sizes: list[int], limit: int) -> None:
    start = {("t", i): 100 for i in range(len(sizes))}
    latest = {("t", i): 100 + s for i, s in enumerate(sizes)}
    end = rate_limit(start, latest, limit)
    assert all(start[tp] <= end[tp] <= latest[tp] for tp in start)
    assert sum(end[tp] - start[tp] for tp in start) == min(limit, sum(sizes))


def test_split_ranges_only_below_min_partitions_and_covers_every_offset() -> None:
    ranges = [OffsetRange("a", 0, 0, 90), OffsetRange("a", 1, 10, 20), OffsetRange("a", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    pieces = split_ranges(ranges, 10)
    assert len(pieces) >= 10
    for partition, (lo, hi) in {0: (0, 90), 1: (10, 20)}.items():
        mine = sorted((r.start, r.end) for r in pieces if r.partition == partition)
        assert mine[0][0] == lo and mine[-1][1] == hi
        assert all(a[1] == b[0] for a, b in itertools.pairwise(mine))


def test_plan_ranges_reports_vanished_and_rewound_partitions() -> None:
    with pytest.raises(DataLossError, match="gone"):
        plan_ranges({A0: 1, A1: 1}, {A0: 5}, {}, fail_on_data_loss=True)
    with pytest.raises(DataLossError, match="went back"):
        plan_ranges({A0: 9}, {A0: 5}, {}, fail_on_data_loss=True)
    assert plan_ranges({A0: 9, A1: 1}, {A0: 5, A1: 4}, {}, fail_on_data_loss=False) == [OffsetRange("a", 1, 1, 4)]


def test_new_partitions_start_at_zero_or_report_loss() -> None:
    assert plan_ranges({A0: 1}, {A0: 2, A1: 3}, {A1: 0}, fail_on_data_loss=True)[1] == OffsetRange("a", 1, 0, 3)
    with pytest.raises(DataLossError, match="instead of 0"):
        plan_ranges({A0: 1}, {A0: 2, A1: 3}, {A1: 2}, fail_on_data_loss=True)


def test_clamp_moves_starts_past_deleted_offsets_only_when_allowed() -> None:
    ranges = [OffsetRange("a", 0, 0, 50)]
    with pytest.raises(DataLossError):
        clamp_to_available(ranges, {A0: 20}, fail_on_data_loss=True)
    assert clamp_to_available(ranges, {A0: 20}, fail_on_data_loss=False) == [OffsetRange("a", 0, 20, 50)]
