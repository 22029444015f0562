"""Partition reassignment under load (issue 5): RF=3 partitions move from brokers {0,1,2} to {1,2,3}, one through
AlterPartitionReassignments, one through ``odradek reassign --execute/--verify``; nothing acknowledged is lost, the
old replica's data leaves broker 0, and the store and Metadata both hold the final assignment."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from harness import ThreadedCluster
from workload import Load, check_nothing_lost, create_topic_with_assignment, partition_view, read_back

from brokers import wait_for
from odradek.cli.cluster import alter_reassignments, controller_connection, list_reassignments, reassign
from odradek.errors import ErrorCode

TOPIC = "mv"
TARGET = [1, 2, 3]


def _moved(c: ThreadedCluster, partition: int) -> bool:
    view = partition_view(c.bootstrap, TOPIC)[partition]
    return view[1] == TARGET and sorted(view[2]) == TARGET


def _old_replica_gone(c: ThreadedCluster, partition: int) -> bool:
    broker_dir = c.cluster.data_dir / "broker-0"
    return not any(p.name.startswith(f"{TOPIC}-{partition}") for p in broker_dir.iterdir()) \
        and c.run(lambda: (TOPIC, partition) not in c.broker(0).replicas.partitions)


def test_reassignment_from_0_1_2_to_1_2_3_under_load(cluster_factory, tmp_path: Path) -> None:
    c = cluster_factory(4)
    create_topic_with_assignment(c.bootstrap, TOPIC, {0: [0, 1, 2], 1: [0, 1, 2]}, {"min.insync.replicas": "2"})
    wait_for(lambda: all(c.leader_of(TOPIC, p) == 0 for p in (0, 1)), 30, what="broker 0 leading both partitions")
    load = Load(c.bootstrap, TOPIC, 2)
    try:
        load.progress(300)
        # partition 0 through the API
        with controller_connection(c.bootstrap) as conn:
            outcome = alter_reassignments(conn, {(TOPIC, 0): TARGET})
        assert outcome == {(TOPIC, 0): (ErrorCode.none, None)}
        # partition 1 through the CLI, as an operator would with kafka-reassign-partitions.sh
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": TOPIC, "partition": 1, "replicas": TARGET, "log_dirs": ["any", "any", "any"]}]}))
        result = CliRunner().invoke(reassign, ["--bootstrap-server", c.bootstrap, "--execute",
                                               "--reassignment-json-file", str(plan)])
        assert result.exit_code == 0, result.output
        rollback = json.loads(result.output.split("\n\n")[1])
        assert rollback["partitions"][0]["replicas"] == [0, 1, 2], result.output
        assert "Successfully started partition reassignments for mv-1" in result.output
        load.progress(300)
        wait_for(lambda: _moved(c, 0) and _moved(c, 1), 60, what="both partitions on {1,2,3} with a full ISR")

        def verified() -> bool:
            out = CliRunner().invoke(reassign, ["--bootstrap-server", c.bootstrap, "--verify",
                                                "--reassignment-json-file", str(plan)])
            return out.exit_code == 0 and "Reassignment of partition mv-1 is completed." in out.output

        wait_for(verified, 30, what="--verify reporting mv-1 completed")
        with controller_connection(c.bootstrap) as conn:
            wait_for(lambda: not list_reassignments(conn), 30, what="no reassignment listed as ongoing")
        load.progress(300)
    finally:
        load.finish()
    check_nothing_lost(load, read_back(c.bootstrap, TOPIC, 2))
    stored = json.loads(c.znode(f"/brokers/topics/{TOPIC}") or b"{}")
    assert stored["partitions"] == {"0": TARGET, "1": TARGET}, stored
    assert not stored.get("adding_replicas") and not stored.get("removing_replicas"), stored
    wait_for(lambda: _old_replica_gone(c, 0) and _old_replica_gone(c, 1), 30, what="broker 0's replicas deleted")
    assert all(partition_view(c.bootstrap, TOPIC)[p][0] in TARGET for p in (0, 1))
