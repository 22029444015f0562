"""The Java transactional producer on odradek: commit and abort read back with read_committed and
read_uncommitted, the last stable offset held by an open transaction, offsets committed in a transaction, the
admin client's views of transactions and producers, fencing by a second producer and by fenceProducers; compared
with the same program against Apache Kafka 3.9."""

from __future__ import annotations

import pytest

from java_clients.conftest import CLIENTS, ProgramRuns
from java_clients.programs import differences, one
from odradek.apache_kafka import KafkaCluster
from odradek.testing import ThreadedCluster


@pytest.mark.parametrize("client", CLIENTS)
def test_commit_abort_and_fencing(runs: ProgramRuns, odradek_java: ThreadedCluster, client: str) -> None:
    prefix, lines = runs.run(client, odradek_java.bootstrap_servers, "TransactionsCheck")
    # a0-a2 committed (offsets 0-2, marker 3), b0-b2 aborted (4-6, marker 7), c0-c1 committed (8-9, marker 10),
    # d0 open at 11 until the end, then aborted (marker 12)
    assert one(lines, "end-offsets") == {"check": "end-offsets", "read_uncommitted": 12, "read_committed": 11}
    committed = one(lines, "read", isolation="read_committed")
    assert committed["records"] == [[0, "a0"], [1, "a1"], [2, "a2"], [8, "c0"], [9, "c1"]]
    assert committed["position"] == 13
    uncommitted = one(lines, "read", isolation="read_uncommitted")
    assert [v for _o, v in uncommitted["records"]] == ["a0", "a1", "a2", "b0", "b1", "b2", "c0", "c1", "d0"]
    assert one(lines, "txn-offset-commit")["offset"] == 5
    assert one(lines, "list-transactions")["transactions"] == [{"id": f"{prefix}-tid", "state": "Ongoing"}]
    described = one(lines, "describe-transactions")
    assert (described["state"], described["topicPartitions"]) == ("Ongoing", [f"{prefix}-txn-0"])
    assert one(lines, "describe-producers")["producers"][0]["currentTransactionStartOffset"] == 11
    assert one(lines, "fenced-by-second-producer")["error"] == "ProducerFencedException"
    assert one(lines, "second-producer-commits")["error"] is None
    fence = one(lines, "admin-fence-producers")
    assert fence["error"] is None and fence["next-commit-error"] is not None


@pytest.mark.parametrize("client", CLIENTS)
def test_same_as_apache_kafka(
    runs: ProgramRuns, odradek_java: ThreadedCluster, apache_kafka_39: KafkaCluster, client: str
) -> None:
    ours, theirs = runs.compared(
        client, odradek_java.bootstrap_servers, apache_kafka_39.bootstrap_servers, "TransactionsCheck"
    )
    assert differences(ours, theirs) == []
