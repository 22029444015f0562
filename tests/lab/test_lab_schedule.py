"""The nemesis schedule is a function of its seed, and the firewall script is what nft is given."""

from __future__ import annotations

from odradek.lab.firewall import TABLE, ruleset
from odradek.lab.nemesis import Kind, draw, format_schedule


def test_the_same_seed_draws_the_same_schedule_and_another_seed_another() -> None:
    a = draw(7, 30, partitions=3, brokers=3)
    assert a == draw(7, 30, partitions=3, brokers=3)
    assert a != draw(8, 30, partitions=3, brokers=3)
    assert format_schedule(7, a) == format_schedule(7, draw(7, 30, partitions=3, brokers=3))


def test_without_a_count_every_kind_comes_once() -> None:
    faults = draw(3, None, partitions=3, brokers=3, hold_s=(1.0, 2.0))
    assert sorted(f.kind for f in faults) == sorted(Kind)
    assert all(1.0 <= f.hold_s <= 2.0 for f in faults)
    assert all(f.target == "zookeeper" for f in faults if f.kind in (Kind.KILL_ZK_LEADER, Kind.KILL_ZK_FOLLOWER))
    assert all(f.target.startswith("leader:") for f in faults if f.kind is Kind.LEADER_CUT_FROM_ZK)
    peer_cut = next(f for f in faults if f.kind is Kind.BROKER_CUT_FROM_PEER)
    assert peer_cut.peer in (1, 2)


def test_targets_stay_inside_the_cluster() -> None:
    for f in draw(11, 200, partitions=3, brokers=3):
        kind, _, n = f.target.partition(":")
        assert kind in ("leader", "broker", "controller", "zookeeper")
        if n:
            assert 0 <= int(n) < 3


def test_the_firewall_script_replaces_the_table_and_drops_both_directions() -> None:
    script = ruleset(["10.77.0.12", "10.77.0.10", "10.77.0.12"])
    lines = script.splitlines()
    assert lines[:2] == [f"table inet {TABLE}", f"delete table inet {TABLE}"]
    assert "ip saddr { 10.77.0.10, 10.77.0.12 } drop" in script
    assert "ip daddr { 10.77.0.10, 10.77.0.12 } drop" in script
    assert ruleset([]).splitlines() == [f"table inet {TABLE}", f"delete table inet {TABLE}"]
