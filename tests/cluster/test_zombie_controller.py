"""A zombie controller changes nothing (issue 5): once a controller's session expired and another broker took over
with a higher epoch, requests stamped with the old epoch are refused with STALE_CONTROLLER_EPOCH."""

from __future__ import annotations

from harness import ThreadedCluster
from workload import create_topic_with_assignment, partition_view

from brokers import wait_for
from odradek.controller import LEADER_AND_ISR, STOP_REPLICA, TcpTransport
from odradek.coordination.znodes import Endpoint
from odradek.errors import ErrorCode
from odradek.protocol.controller_requests import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    decode_response,
    encode_body,
)

TOPIC = "z"


def _send(c: ThreadedCluster, broker_id: int, api_key: int, request: object) -> object:
    async def go() -> object:
        b = c.broker(broker_id)
        transport = TcpTransport(client_id="zombie")
        try:
            raw = await transport.send(broker_id, Endpoint("PLAINTEXT", b.host, b.port), api_key, encode_body(request))
        finally:
            await transport.close()
        return decode_response(api_key, raw)

    return c.call(go())


def test_requests_from_a_controller_whose_session_expired_are_refused(cluster_factory) -> None:
    c = cluster_factory(3)
    create_topic_with_assignment(c.bootstrap, TOPIC, {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})
    wait_for(lambda: [c.leader_of(TOPIC, p) for p in range(3)] == [0, 1, 2], 30, what="preferred leaders")
    wait_for(lambda: c.controller_id() is not None, 30, what="a controller")
    zombie = c.controller_id()
    assert zombie is not None
    old_epoch = c.controller_epoch(zombie)
    c.expire_session(zombie)
    wait_for(lambda: c.controller_id() not in (None, zombie), 30, what="another broker taking over")
    new = c.controller_id()
    assert new is not None and c.controller_epoch(new) > old_epoch
    assert not c.run(lambda: c.broker(zombie).controller.is_active), "the zombie still thinks it is controller"

    target = next(b for b in range(3) if b != zombie)  # a broker that leads partition `target`
    part_before = c.run(lambda: (c.broker(target).replicas.partitions[(TOPIC, target)].leader_id,
                                 c.broker(target).replicas.partitions[(TOPIC, target)].leader_epoch))
    follower = (target + 1) % 3
    hijack = LeaderAndIsrRequest(
        controller_id=zombie, controller_epoch=old_epoch, broker_epoch=-1,
        partition_states=[LeaderAndIsrPartitionState(
            topic=TOPIC, partition=target, controller_epoch=old_epoch, leader=follower,
            leader_epoch=part_before[1] + 10, isr=[follower], zk_version=99, replicas=[target, follower],
        )],
        live_leaders=[],
    )
    response = _send(c, target, LEADER_AND_ISR, hijack)
    assert response.error_code == ErrorCode.stale_controller_epoch, response
    stop = StopReplicaRequest(controller_id=zombie, controller_epoch=old_epoch, broker_epoch=-1,
                              delete_partitions=True, partitions=[StopReplicaPartition(TOPIC, target)])
    response = _send(c, target, STOP_REPLICA, stop)
    assert response.error_code == ErrorCode.stale_controller_epoch, response

    assert c.run(lambda: (TOPIC, target) in c.broker(target).replicas.partitions), \
        "the stale StopReplica deleted a replica"
    part_after = c.run(lambda: (c.broker(target).replicas.partitions[(TOPIC, target)].leader_id,
                                c.broker(target).replicas.partitions[(TOPIC, target)].leader_epoch))
    assert part_after == part_before
    assert (c.cluster.data_dir / f"broker-{target}" / f"{TOPIC}-{target}").is_dir()
    assert partition_view(c.bootstrap, TOPIC)[target][0] == target
