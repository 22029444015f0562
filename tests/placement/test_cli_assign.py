"""``odradek assign`` subcommands, driven through click's runner."""

from __future__ import annotations

import json

from click.testing import CliRunner

from odradek.cli.assign import assign
from odradek.placement import BrokerMetadata, assign_replicas_to_brokers


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(assign, list(args))
    return result.exit_code, result.output


def test_replicas_prints_kafka_reassignment_json() -> None:
    code, out = _run(
        "replicas",
        "--brokers",
        "0:rack1,1:rack3,2:rack3,3:rack2,4:rack2,5:rack1",
        "--partitions",
        "7",
        "--replication-factor",
        "3",
        "--start-index",
        "0",
        "--start-partition",
        "0",
        "--topic",
        "orders",
    )
    assert code == 0, out
    doc = json.loads(out)
    assert doc["version"] == 1
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers
    assert [p["replicas"] for p in doc["partitions"]] == [
        [0, 3, 1],
        [3, 1, 5],
        [1, 5, 4],
        [5, 4, 2],
        [4, 2, 0],
        [2, 0, 3],
        [0, 4, 2],
    ]
    assert all(p["topic"] == "orders" and p["log_dirs"] == ["any"] * 3 for p in doc["partitions"])
    assert [p["partition"] for p in doc["partitions"]] == list(range(7))


def test_replicas_random_start_is_reproducible_with_seed() -> None:
    args = ("replicas", "--brokers", "0,1,2,3,4", "--partitions", "10", "--replication-factor", "3", "--seed", "7")
    first, second = _run(*args), _run(*args)
    assert first == second and first[0] == 0
    got = {p["partition"]: p["replicas"] for p in json.loads(first[1])["partitions"]}
    # whatever the draw, it is one of Kafka's deterministic layouts
    layouts = [assign_replicas_to_brokers(10, 3, [BrokerMetadata(i) for i in range(5)], s) for s in range(5)]
    assert all(len(set(r)) == 3 for r in got.values())
    assert sorted(r[0] for r in got.values()) == sorted(r[0] for r in layouts[0].values())


def test_replicas_reports_kafka_errors() -> None:
    code, out = _run("replicas", "--brokers", "0:rackA,1", "--partitions", "3", "--replication-factor", "2")
    assert code != 0
    assert "AdminOperationException" in out
    code, out = _run("replicas", "--brokers", "0,1", "--partitions", "3", "--replication-factor", "3")
    assert code != 0
    assert "Replication factor: 3 larger than available brokers: 2." in out


def test_consumers_table_shows_balance() -> None:
    code, out = _run("consumers", "--strategy", "sticky", "--members", "c1,c2,c3", "--topics", "orders:7,audit:3")
    assert code == 0, out
    assert "c1" in out and "c3" in out
    assert "3 members, 10 partitions, min 3, max 4: balanced" in out


def test_consumers_json_with_mixed_subscriptions() -> None:
    code, out = _run(
        "consumers", "--strategy", "range", "--members", "c1,c2=audit", "--topics", "orders:4,audit:2", "--json"
    )
    assert code == 0, out
    assert json.loads(out) == {"c1": ["orders-0", "orders-1", "orders-2", "orders-3", "audit-0"], "c2": ["audit-1"]}
