"""The controller-to-broker APIs, sent by a client that is no controller: LeaderAndIsr (4), StopReplica (5),
UpdateMetadata (6) with a stale controller epoch, and ControlledShutdown (7) for a broker that is not there. Kafka
fences the first three by controller epoch before looking at anything else; both must refuse without changing
state."""

from __future__ import annotations

from differential_corpus import Call, Scenario

from odradek.protocol.controller_requests import (
    ControlledShutdownRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
)

_STALE = {"controller_id": 99, "controller_epoch": 0, "broker_epoch": -1}

SCENARIOS = [
    Scenario("leader-and-isr.v4.stale-controller-epoch",
             Call(4, 4, LeaderAndIsrRequest(**_STALE, partition_states=[], live_leaders=[]))),
    Scenario("stop-replica.v3.stale-controller-epoch",
             Call(5, 3, StopReplicaRequest(**_STALE, delete_partitions=False, partitions=[]))),
    Scenario("update-metadata.v6.stale-controller-epoch",
             Call(6, 6, UpdateMetadataRequest(**_STALE, partition_states=[], live_brokers=[]))),
    Scenario("controlled-shutdown.v3.unknown-broker",
             Call(7, 3, ControlledShutdownRequest(broker_id=99, broker_epoch=-1))),
    Scenario("controlled-shutdown.v3.unknown-broker-with-epoch",
             Call(7, 3, ControlledShutdownRequest(broker_id=99, broker_epoch=0))),
]
