"""Scenarios only a cluster shows, for the three-broker corpus (``test_differential_cluster.py``): leaders and ISRs
after a broker stops (a controlled shutdown) and returns, preferred elections, reassignments, replica placement,
requests to a follower, and acks=all under min.insync.replicas.

Topics are placed by hand (``Topic.replicas``), so both clusters hold the same replicas where the same brokers;
each step that changes the cluster is followed by a step that waits, on every broker, for the state it leads to."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from differential_corpus import Act, Batch, Call, Ref, Scenario, Topic, init_producer, produce

SETTINGS = {"auto.leader.rebalance.enable": "false", "group.initial.rebalance.delay.ms": "0"}
"""Both clusters: no automatic preferred-leader elections (a scenario elects when it means to)."""

_BROKERS = (1, 2, 3)
_ZERO_ID = "00000000-0000-0000-0000-000000000000"


def _partitions(r: Any) -> dict[int, dict[str, Any]]:
    return {p["partition_index"]: p for p in r["topics"][0]["partitions"]} if r["topics"][0]["error_code"] == 0 \
        else {}


def _seen(condition: Callable[[Any], bool], brokers: tuple[int, ...] = _BROKERS) -> tuple[Call, ...]:
    """Metadata of the scenario's topic on each of ``brokers`` until ``condition`` holds of the response."""
    return tuple(Call(3, 12, {"topics": [{"name": "{topic}"}], "allow_auto_topic_creation": False},
                      until=condition, to=node) for node in brokers)


def _without(broker: int) -> Callable[[Any], bool]:
    """The broker gone from the brokers' list, from every leadership and from every ISR of the topic."""
    return lambda r: bool(_partitions(r)) and all(b["node_id"] != broker for b in r["brokers"]) and all(
        p["leader_id"] != broker and broker not in p["isr_nodes"] for p in _partitions(r).values())


def _whole(r: Any) -> bool:
    """Every broker listed, and every partition of the topic with its whole ISR."""
    ps = _partitions(r)
    return len(r["brokers"]) == len(_BROKERS) and bool(ps) and all(
        sorted(p["isr_nodes"]) == sorted(p["replica_nodes"]) for p in ps.values())


def _stop(broker: int) -> tuple[Call | Act, ...]:
    """Stop ``broker`` (SIGTERM: a controlled shutdown) and wait until the others have moved its leaderships and
    dropped it from every ISR of the topic."""
    return (Act("stop", broker), *_seen(_without(broker), tuple(b for b in _BROKERS if b != broker)))


def _bounce(broker: int) -> tuple[Call | Act, ...]:
    """Stop ``broker``, start it again, and wait until it is back in every ISR of the topic on every broker."""
    return (*_stop(broker), Act("start", broker), *_seen(_whole))


def _metadata(version: int = 12) -> Call:
    return Call(3, version, {"topics": [{"name": "{topic}"}], "allow_auto_topic_creation": False,
                             "include_topic_authorized_operations": False})


def _create(assignments: list[list[int]] | None = None, *, partitions: int = -1, rf: int = -1) -> Call:
    return Call(19, 7, {"topics": [{"name": "{topic}", "num_partitions": partitions, "replication_factor": rf,
                                    "assignments": [{"partition_index": i, "broker_ids": b}
                                                    for i, b in enumerate(assignments or [])],
                                    "configs": []}], "timeout": 30000}, to="controller")


def _reassign(replicas: list[int] | None, partition: int = 0) -> Call:
    return Call(45, 0, {"timeout": 30000, "topics": [{"name": "{topic}", "partitions": [
        {"partition_index": partition, "replicas": replicas}]}]}, to="controller")


def _fetch(version: int, to: int) -> Call:
    return Call(1, version, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                             "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [{
                                 "topic": "{topic}", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                                    "fetch_offset": 0, "log_start_offset": -1,
                                                                    "partition_max_bytes": 1 << 20}]}],
                             "forgotten_topics_data": [], "rack_id": ""}, to=to)


_SPREAD = (Topic(replicas=((1, 2, 3), (2, 3, 1), (3, 1, 2))),)
_MOVING = (Topic(replicas=((3, 1), (1, 3), (1, 2))),)
"""Partition 0 led by the broker a scenario stops, 1 followed by it, 2 without it."""

_MOVED = (_reassign([2, 3]), *_seen(lambda r: _whole(r) and _partitions(r)[0]["replica_nodes"] == [2, 3]))
"""Partition 0 moved from brokers 1 and 2 to 2 and 3, and the move finished (seen by every broker)."""

SCENARIOS = [
    Scenario("cluster.metadata.v12.three-replicas", _metadata(), topics=_SPREAD),
    Scenario("cluster.metadata.v1.three-replicas", _metadata(1), topics=_SPREAD),
    Scenario("cluster.describe-cluster.v1.racks", Call(60, 1, {"include_cluster_authorized_operations": False,
                                                               "endpoint_type": 1})),
    Scenario("cluster.metadata.v12.broker-stopped", _metadata(), topics=_MOVING, setup=_stop(3)),
    Scenario("cluster.metadata.v12.broker-returned", _metadata(), topics=_MOVING, setup=_bounce(3)),
    Scenario("cluster.elect-leaders.v2.preferred-after-return", Call(43, 2, {"election_type": 0, "topic_partitions": [
        {"topic": "{topic}", "partitions": [0, 1, 2]}], "timeout": 30000}, to="controller"), topics=_MOVING,
             setup=_bounce(3)),
    Scenario("cluster.produce.v9.acks-all-under-min-isr", produce(Batch()), topics=(
        Topic(replicas=((1, 3),), configs={"min.insync.replicas": "2"}),), setup=_stop(3)),
    Scenario("cluster.produce.v9.to-follower", Call(0, 9, produce(Batch()).body, to=2),
             topics=(Topic(replicas=((1, 2),)),)),
    *(Scenario(f"cluster.fetch.v{v}.from-follower", _fetch(v, 2), topics=(Topic(replicas=((1, 2),)),),
               setup=(produce(Batch()),)) for v in (10, 12)),
    Scenario("cluster.list-offsets.v7.from-follower", Call(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "{topic}", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
        to=2), topics=(Topic(replicas=((1, 2),)),)),
    # controller-only requests sent elsewhere (ZooKeeper-mode Kafka answers NOT_CONTROLLER; clients then retry)
    Scenario("cluster.create-topics.v7.not-controller", Call(19, 7, _create([[1, 2]]).body, to="not-controller")),
    Scenario("cluster.delete-topics.v6.not-controller", Call(20, 6, {
        "topics": [{"name": "{topic}", "topic_id": _ZERO_ID}], "timeout_ms": 30000}, to="not-controller"),
        topics=(Topic(replicas=((1, 2),)),)),
    Scenario("cluster.create-partitions.v3.not-controller", Call(37, 3, {"topics": [
        {"name": "{topic}", "count": 2, "assignments": None}], "timeout_ms": 30000, "validate_only": False},
        to="not-controller"), topics=(Topic(replicas=((1, 2),)),)),
    Scenario("cluster.elect-leaders.v2.not-controller", Call(43, 2, {"election_type": 0, "topic_partitions": [
        {"topic": "{topic}", "partitions": [0]}], "timeout": 30000}, to="not-controller"),
        topics=(Topic(replicas=((1, 2),)),)),
    Scenario("cluster.alter-partition-reassignments.v0.not-controller", Call(45, 0, _reassign([2, 1]).body,
                                                                             to="not-controller"),
             topics=(Topic(replicas=((1, 2),)),)),
    Scenario("cluster.list-partition-reassignments.v0.not-controller", Call(46, 0, {"timeout": 30000, "topics": None},
                                                                            to="not-controller")),
    # partition requests to a follower
    Scenario("cluster.offset-for-leader-epoch.v4.from-follower", Call(23, 4, {"replica_id": -1, "topics": [
        {"topic": "{topic}", "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]},
        to=2), topics=(Topic(replicas=((1, 2),)),)),
    Scenario("cluster.describe-producers.v0.from-follower", Call(61, 0, {"topics": [
        {"name": "{topic}", "partition_indexes": [0]}]}, to=2), topics=(Topic(replicas=((1, 2),)),)),
    Scenario("cluster.describe-producers.v0.follower-after-idempotent-produce", Call(61, 0, {"topics": [
        {"name": "{topic}", "partition_indexes": [0]}]}, to=2), topics=(Topic(replicas=((1, 2),)),), setup=(
        init_producer(), produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"), base_sequence=0)))),
    Scenario("cluster.metadata.v12.from-another-broker", Call(3, 12, _metadata().body, to=3), topics=_SPREAD),
    Scenario("cluster.describe-log-dirs.v4.one-broker-view", Call(35, 4, {"topics": [
        {"topic": "{topic}", "partitions": [0, 1]}]}, to=2), topics=(Topic(replicas=((1, 2), (1, 3))),)),
    Scenario("cluster.create-topics.v7.replica-assignment", _create([[1, 2], [2, 3], [3, 1]])),
    Scenario("cluster.create-topics.v7.rack-aware", _create(partitions=3, rf=3)),
    Scenario("cluster.create-topics.v7.replication-factor-above-brokers", _create(partitions=1, rf=4)),
    Scenario("cluster.create-topics.v7.unknown-broker-in-assignment", _create([[1, 9]])),
    Scenario("cluster.create-topics.v7.uneven-assignment", _create([[1, 2], [1]])),
    Scenario("cluster.create-topics.v7.duplicate-broker-in-assignment", _create([[1, 1]])),
    Scenario("cluster.alter-partition-reassignments.v0.add-replica", _reassign([1, 2, 3]),
             topics=(Topic(replicas=((1, 2),)),)),
    Scenario("cluster.alter-partition-reassignments.v0.cancel-none", _reassign(None),
             topics=(Topic(replicas=((1, 2),)),)),
    Scenario("cluster.list-partition-reassignments.v0.after-move", Call(46, 0, {"timeout": 30000, "topics": [
        {"name": "{topic}", "partition_indexes": [0]}]}, to="controller"), topics=(Topic(replicas=((1, 2),)),),
             setup=_MOVED),
    Scenario("cluster.metadata.v12.after-move", _metadata(), topics=(Topic(replicas=((1, 2),)),),
             setup=_MOVED),
]
