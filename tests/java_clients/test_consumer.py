"""The Java consumer on odradek: offsetsForTimes, seeks, beginning and end offsets, commitSync and committed, a new
member resuming from the committed offset; in classic groups with both clients and, with the 4.x client, in KIP-848
consumer groups (``group.protocol=consumer``). Compared with the same program against Apache Kafka 3.9 (classic)
and 4.x (consumer groups)."""

from __future__ import annotations

import pytest

from java_clients.conftest import CLIENTS, ProgramRuns
from java_clients.programs import by_check, differences, one
from odradek.apache_kafka import KAFKA_4, KafkaCluster
from odradek.testing import ThreadedCluster

PROTOCOLS = [(client, "classic") for client in CLIENTS] + [(KAFKA_4, "consumer")]


@pytest.mark.parametrize(("client", "protocol"), PROTOCOLS)
def test_offsets_seeks_and_commits(
    runs: ProgramRuns, odradek_java: ThreadedCluster, client: str, protocol: str
) -> None:
    _prefix, lines = runs.run(client, odradek_java.bootstrap_servers, "ConsumerCheck", protocol)
    # records 0-9 carry timestamps BASE + 1000 * offset
    found = {
        line["timestamp"]: (line["offset"], line["recordTimestamp"]) for line in by_check(lines, "offsets-for-times")
    }
    assert found == {-1: (0, 0), 2500: (3, 3000), 9000: (9, 9000), 99999: (None, None)}
    assert one(lines, "seek")["first"] == 4
    assert one(lines, "seek-by-time")["first"] == 7
    ends = one(lines, "seek-to-ends")
    assert (ends["beginning"], ends["end"], ends["beginningOffsets"], ends["endOffsets"]) == (0, 10, 0, 10)
    assert one(lines, "group-read")["offsets"] == list(range(10))
    assert (one(lines, "commit-explicit")["offset"], one(lines, "commit-explicit")["metadata"]) == (7, "seven")
    assert one(lines, "commit-position")["offset"] == 10
    assert one(lines, "resume-from-committed")["offsets"] == list(range(3, 10))
    live, empty = one(lines, "describe-group-live"), one(lines, "describe-group-empty")
    assert (live["type"], live["state"], live["members"]) == (protocol.capitalize(), "Stable", [[0]])
    assert (empty["state"], empty["members"]) == ("Empty", [])


@pytest.mark.parametrize(("client", "protocol"), PROTOCOLS)
def test_offsets_same_as_apache_kafka(
    runs: ProgramRuns, odradek_java: ThreadedCluster, request: pytest.FixtureRequest, client: str, protocol: str
) -> None:
    control: KafkaCluster = request.getfixturevalue("apache_kafka_39" if protocol == "classic" else "apache_kafka_4")
    ours, theirs = runs.compared(
        client, odradek_java.bootstrap_servers, control.bootstrap_servers, "ConsumerCheck", protocol
    )
    assert differences(ours, theirs) == []
