"""``odradek reassign --generate`` and ``odradek elect`` argument handling, on a live cluster and offline.

The --execute/--verify and --preferred paths under load are in test_reassign.py and test_preferred.py."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from workload import create_topic_with_assignment

from brokers import wait_for
from odradek.cli import main
from odradek.cli.cluster import (
    assignment_json,
    elect,
    parse_reassignment_json,
    parse_topics_to_move_json,
    reassign,
)


def test_reassignment_json_round_trips_and_rejects_bad_plans() -> None:
    plan = {("t", 1): [2, 3], ("t", 0): [1, 2]}
    text = assignment_json(plan)
    assert json.loads(text)["partitions"][0] == {"topic": "t", "partition": 0, "replicas": [1, 2],
                                                  "log_dirs": ["any", "any"]}
    assert parse_reassignment_json(text) == plan
    with pytest.raises(click.ClickException, match="repeats"):
        parse_reassignment_json('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}')
    with pytest.raises(click.ClickException, match="not a partition reassignment JSON"):
        parse_reassignment_json('{"version":1}')
    assert parse_topics_to_move_json('{"topics":[{"topic":"a"},{"topic":"b"}],"version":1}') == ["a", "b"]


def test_the_odradek_command_mounts_every_tool() -> None:
    assert {"reassign", "elect", "assign", "topics", "groups", "configs", "produce", "consume", "dump-log",
            "perf"} <= set(main.commands)


def test_verify_watch_waits_until_the_reassignment_is_done(cluster_factory, tmp_path: Path) -> None:
    c = cluster_factory(3)
    create_topic_with_assignment(c.bootstrap, "w", {0: [0, 1], 1: [1, 0]})
    wait_for(lambda: c.leader_of("w", 1) == 1, 30, what="topic w online")
    plan = tmp_path / "plan.json"
    plan.write_text(assignment_json({("w", 0): [1, 2], ("w", 1): [2, 1]}))
    runner = CliRunner()
    started = runner.invoke(reassign, ["--bootstrap-server", c.bootstrap, "--execute",
                                       "--reassignment-json-file", str(plan)])
    assert started.exit_code == 0, started.output
    watched = runner.invoke(reassign, ["--bootstrap-server", c.bootstrap, "--verify", "--watch", "--timeout", "60",
                                       "--reassignment-json-file", str(plan)])
    assert watched.exit_code == 0, watched.output
    assert "Reassignment of partition w-0 is completed." in watched.output
    assert "Reassignment of partition w-1 is completed." in watched.output


def test_generate_proposes_a_plan_on_the_given_brokers_only(cluster_factory, tmp_path: Path) -> None:
    c = cluster_factory(4)
    create_topic_with_assignment(c.bootstrap, "g", {0: [0, 1], 1: [1, 0], 2: [0, 1]})
    wait_for(lambda: c.leader_of("g", 2) == 0, 30, what="topic g online")
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"g"}],"version":1}')
    result = CliRunner().invoke(reassign, ["--bootstrap-server", c.bootstrap, "--generate",
                                           "--topics-to-move-json-file", str(topics), "--broker-list", "2,3"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    current = parse_reassignment_json(lines[lines.index("Current partition replica assignment") + 1])
    proposed = parse_reassignment_json(lines[lines.index("Proposed partition reassignment configuration") + 1])
    assert current == {("g", 0): [0, 1], ("g", 1): [1, 0], ("g", 2): [0, 1]}
    assert set(proposed) == set(current)
    assert all(sorted(r) == [2, 3] for r in proposed.values()), proposed
    bad = CliRunner().invoke(reassign, ["--bootstrap-server", c.bootstrap, "--generate",
                                        "--topics-to-move-json-file", str(topics), "--broker-list", "2,9"])
    assert bad.exit_code != 0 and "[9]" in bad.output


def test_elect_arguments_and_json_file(cluster_factory, tmp_path: Path) -> None:
    c = cluster_factory(3)
    create_topic_with_assignment(c.bootstrap, "e", {0: [0, 1, 2], 1: [1, 2, 0]})
    wait_for(lambda: c.leader_of("e", 1) == 1, 30, what="topic e online")
    runner = CliRunner()
    usage = runner.invoke(elect, ["--bootstrap-server", c.bootstrap, "--preferred"])
    assert usage.exit_code == 2 and "exactly one of" in usage.output
    usage = runner.invoke(elect, ["--bootstrap-server", c.bootstrap, "--all-topic-partitions"])
    assert usage.exit_code == 2 and "--preferred" in usage.output
    doc = tmp_path / "partitions.json"
    doc.write_text('{"partitions":[{"topic":"e","partition":1},{"topic":"nope","partition":0}]}')
    result = runner.invoke(elect, ["--bootstrap-server", c.bootstrap, "--election-type", "preferred",
                                   "--path-to-json-file", str(doc)])
    assert "Valid replica already elected for partitions e-1" in result.output, result.output
    assert "nope-0: UNKNOWN_TOPIC_OR_PARTITION" in result.output, result.output
    assert result.exit_code == 1
    result = runner.invoke(elect, ["--bootstrap-server", c.bootstrap, "--unclean", "--topic", "e", "--partition", "0"])
    assert result.exit_code == 0 and "Valid replica already elected for partitions e-0" in result.output, result.output
