"""The Java admin client on odradek: every operation odradek serves, run by ``AdminCheck`` in one program (one line
per operation), checked against what Kafka answers (the expected errors below) and compared operation by operation
with the same program against Apache Kafka 3.9."""

from __future__ import annotations

from typing import Any

import pytest

from java_clients.conftest import CLIENTS, ProgramRuns
from java_clients.programs import by_check, without_prefix
from odradek.apache_kafka import KafkaCluster
from odradek.testing import ThreadedCluster

OPS = [
    "describe-cluster",
    "create-topics",
    "create-topics-validate-only",
    "create-topics-exists",
    "create-topics-invalid-name",
    "create-topics-replication-factor-too-big",
    "create-topics-invalid-config",
    "list-topics",
    "describe-topics",
    "describe-topics-unknown",
    "create-partitions",
    "create-partitions-decrease",
    "describe-configs-topic",
    "incremental-alter-configs-topic",
    "incremental-alter-configs-invalid",
    "incremental-alter-configs-unknown-topic",
    "alter-configs-legacy",
    "describe-configs-broker",
    "describe-configs-broker-read-only",
    "describe-configs-broker-log-retention",
    "incremental-alter-configs-broker",
    "list-consumer-groups",
    "describe-consumer-groups",
    "list-consumer-group-offsets",
    "alter-consumer-group-offsets",
    "delete-consumer-group-offsets",
    "delete-consumer-groups",
    "delete-consumer-groups-unknown",
    "list-offsets",
    "delete-records",
    "delete-records-beyond-end",
    "elect-leaders-preferred",
    "elect-leaders-unclean",
    "list-partition-reassignments",
    "alter-partition-reassignments",
    "alter-partition-reassignments-cancel-none",
    "alter-partition-reassignments-unknown-broker",
    "describe-log-dirs",
    "describe-replica-log-dirs",
    "alter-replica-log-dirs-same-dir",
    "alter-replica-log-dirs-unknown-dir",
    "describe-features",
    "create-acls",
    "describe-acls",
    "delete-acls",
    "alter-user-scram-credentials",
    "alter-user-scram-credentials-delete",
    "alter-user-scram-credentials-too-few-iterations",
    "describe-user-scram-credentials-unknown",
    "alter-client-quotas",
    "alter-client-quotas-remove",
    "alter-client-quotas-unknown-key",
    "delete-topics",
    "delete-topics-unknown",
    "describe-metadata-quorum",
]
"""Every operation AdminCheck runs, in its order."""

EXPECTED_ERRORS = {
    "create-topics-exists": "TopicExistsException",
    "create-topics-invalid-name": "InvalidTopicException",
    "create-topics-replication-factor-too-big": "InvalidReplicationFactorException",
    "create-topics-invalid-config": "InvalidConfigurationException",
    "describe-topics-unknown": "UnknownTopicOrPartitionException",
    "create-partitions-decrease": "InvalidPartitionsException",
    "incremental-alter-configs-invalid": "InvalidConfigurationException",
    "incremental-alter-configs-unknown-topic": "UnknownTopicOrPartitionException",
    "delete-consumer-groups-unknown": "GroupIdNotFoundException",
    "delete-records-beyond-end": "OffsetOutOfRangeException",
    "alter-partition-reassignments-cancel-none": "NoReassignmentInProgressException",
    "alter-partition-reassignments-unknown-broker": "InvalidReplicaAssignmentException",
    # neither broker has an authorizer configured
    "create-acls": "SecurityDisabledException",
    "describe-acls": "SecurityDisabledException",
    "delete-acls": "SecurityDisabledException",
    "alter-user-scram-credentials-too-few-iterations": "UnacceptableCredentialException",
    "describe-user-scram-credentials-unknown": "ResourceNotFoundException",
    "alter-client-quotas-unknown-key": "InvalidRequestException",
    "delete-topics-unknown": "UnknownTopicOrPartitionException",
    "alter-replica-log-dirs-unknown-dir": "LogDirNotFoundException",
    # DescribeQuorum belongs to KRaft; a ZooKeeper-mode broker does not serve it
    "describe-metadata-quorum": "UnsupportedVersionException",
}
"""The operations that must fail, with the exception Kafka's client raises; every other one must succeed."""

KNOWN_DIFFERENCES: dict[str, str] = {
    "describe-features": "odradek supports and finalizes group.version (level 1) so that 4.x clients run KIP-848 "
    "consumer groups on it; a ZooKeeper-mode Kafka 3.9 reports no features",
}
"""Operations where odradek answers differently from Apache Kafka 3.9, with the reason (docs/compatibility-java.md)."""


def _op(runs: ProgramRuns, client: str, bootstrap: str, op: str) -> dict[str, Any]:
    prefix, lines = runs.run(client, bootstrap, "AdminCheck")
    lines = without_prefix(by_check(lines, "admin"), prefix)
    assert [line["op"] for line in lines] == OPS, lines
    return next(line for line in lines if line["op"] == op)


REFUSED_BY_ODRADEK: set[str] = set()
"""Operations of KNOWN_DIFFERENCES that fail on odradek where Kafka succeeds (the others differ in what they show)."""


def _cases(xfails: dict[str, str]) -> list[Any]:
    return [
        pytest.param(
            client, op, id=f"{client}-{op}",
            marks=[pytest.mark.xfail(strict=True, reason=xfails[op])] if op in xfails else [],
        )
        for client in CLIENTS
        for op in OPS
    ]


@pytest.mark.parametrize(("client", "op"), _cases({op: KNOWN_DIFFERENCES[op] for op in REFUSED_BY_ODRADEK}))
def test_operation_on_odradek(runs: ProgramRuns, odradek_java: ThreadedCluster, client: str, op: str) -> None:
    line = _op(runs, client, odradek_java.bootstrap_servers, op)
    assert line["error"] == EXPECTED_ERRORS.get(op), line


@pytest.mark.parametrize(("client", "op"), _cases(KNOWN_DIFFERENCES))
def test_operation_same_as_apache_kafka(
    runs: ProgramRuns, odradek_java: ThreadedCluster, apache_kafka_39: KafkaCluster, client: str, op: str
) -> None:
    ours = _op(runs, client, odradek_java.bootstrap_servers, op)
    theirs = _op(runs, client, apache_kafka_39.bootstrap_servers, op)
    assert ours == theirs
