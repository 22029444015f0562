"""The pure parts: state tables, request codecs and framing, the request batch, the selectors."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest

from odradek.controller.batch import RequestBatch
from odradek.controller.context import ControllerContext, LeaderIsr, PartitionReplica, ReplicaAssignment
from odradek.controller.election import Elected, Election, NotElected, elect_leader, without_replica
from odradek.controller.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    ReplicaState,
    StateTable,
)
from odradek.controller.transport import TcpTransport, request_controlled_shutdown
from odradek.coordination.znodes import BrokerRegistration, Endpoint, TopicPartition
from odradek.errors import ErrorCode
from odradek.protocol.controller_requests import (
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaPartition,
    decode_request,
    decode_response,
    encode_body,
    frame_response,
    parse_request_frame,
)

# ------------------------------------------------------------------------------------------ states


@pytest.mark.parametrize(
    ("kind", "table", "initial", "states"),
    [
        ("Partition", PARTITION_VALID_PREVIOUS, PartitionState.NON_EXISTENT, list(PartitionState)),
        ("Replica", REPLICA_VALID_PREVIOUS, ReplicaState.NON_EXISTENT, list(ReplicaState)),
    ],
)
def test_every_transition_is_allowed_exactly_when_the_table_says(kind, table, initial, states, caplog) -> None:
    caplog.set_level(logging.ERROR, logger="state.change.logger")
    for source, target in itertools.product(states, states):
        machine: StateTable = StateTable(kind, table, initial)
        machine.put("x", source)
        caplog.clear()
        moved = machine.move("x", target)
        assert moved == (source in table[target]), (source, target)
        if moved:
            assert machine.get("x") is target
        else:
            assert machine.get("x") is source
            assert [r.name for r in caplog.records] == ["state.change.logger"]
            assert "illegal state transition" in caplog.records[0].getMessage()


def test_seed_tables() -> None:
    P, R = PartitionState, ReplicaState
    assert PARTITION_VALID_PREVIOUS[P.NON_EXISTENT] == {P.OFFLINE}
    assert PARTITION_VALID_PREVIOUS[P.ONLINE] == {P.NEW, P.ONLINE, P.OFFLINE}
    assert REPLICA_VALID_PREVIOUS[R.DELETION_STARTED] == {R.OFFLINE}
    assert REPLICA_VALID_PREVIOUS[R.NON_EXISTENT] == {R.DELETION_SUCCESSFUL}
    assert REPLICA_VALID_PREVIOUS[R.ONLINE] == {R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}


def test_split_refuses_and_logs_only_the_illegal_ones(caplog) -> None:
    caplog.set_level(logging.ERROR, logger="state.change.logger")
    machine: StateTable = StateTable("Partition", PARTITION_VALID_PREVIOUS, PartitionState.NON_EXISTENT)
    machine.put("online", PartitionState.ONLINE)
    valid, invalid = machine.split(["fresh", "online"], PartitionState.NEW)
    assert (valid, invalid) == (["fresh"], ["online"])
    assert len(caplog.records) == 1 and "OnlinePartition to NewPartition" in caplog.records[0].getMessage()


# ------------------------------------------------------------------------------------------ codecs

LAIR = LeaderAndIsrRequest(
    controller_id=0, controller_epoch=3, broker_epoch=77,
    partition_states=[LeaderAndIsrPartitionState("t", 0, 3, 1, 5, [1, 2], 9, [1, 2, 3], [3], [], True)],
    live_leaders=[LeaderAndIsrLiveLeader(1, "127.0.0.1", 9092)],
)
CS = ControlledShutdownRequest(4, 123)


async def test_tcp_transport_frames_requests_as_a_broker_reads_them() -> None:
    seen = []

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                size = int.from_bytes(await reader.readexactly(4), "big")
            except asyncio.IncompleteReadError:
                break
            header, body = parse_request_frame(await reader.readexactly(size))
            request = decode_request(header.api_key, body)
            seen.append((header.api_key, request))
            if header.api_key == CONTROLLED_SHUTDOWN:
                reply = ControlledShutdownResponse(0, [StopReplicaPartition("t", 0)])
            else:
                reply = LeaderAndIsrResponse(0, [])
            writer.write(frame_response(header.correlation_id, encode_body(reply)))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(broker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = TcpTransport()
    try:
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", port)
        raw = await transport.send(1, endpoint, LEADER_AND_ISR, encode_body(LAIR))
        assert decode_response(LEADER_AND_ISR, raw) == LeaderAndIsrResponse(0, [])
        response = await request_controlled_shutdown(transport, 1, endpoint, 4, 123)
        assert response.remaining_partitions == [StopReplicaPartition("t", 0)]
        assert seen == [(LEADER_AND_ISR, LAIR), (CONTROLLED_SHUTDOWN, CS)]
    finally:
        await transport.close()
        server.close()
        await server.wait_closed()


# ---------------------------------------------------------------------------------- batch, selectors


def context() -> ControllerContext:
    ctx = ControllerContext(epoch=5)
    for broker in (1, 2, 3):
        ctx.live_brokers[broker] = BrokerRegistration(broker, (Endpoint("PLAINTEXT", "h", 9000 + broker),),
                                                      rack=f"r{broker}")
        ctx.broker_epochs[broker] = 100 + broker
    ctx.assignments[TopicPartition("t", 0)] = ReplicaAssignment((1, 2, 4))
    ctx.leadership[TopicPartition("t", 0)] = LeaderIsr(1, 7, (1, 2, 4), 4, 11)
    return ctx


def test_batch_groups_per_broker_in_kafka_order_and_skips_dead_brokers() -> None:
    ctx = context()
    tp = TopicPartition("t", 0)
    batch = RequestBatch()
    batch.add_leader_and_isr(ctx, [1, 2, 4], tp, ctx.leadership[tp])
    batch.add_stop_replica(ctx, [2], tp, delete=False)
    batch.add_stop_replica(ctx, [2], tp, delete=True)
    out = batch.build(ctx, controller_id=1)
    assert [(o.broker_id, o.api_key) for o in out] == [
        (1, LEADER_AND_ISR), (1, UPDATE_METADATA), (2, LEADER_AND_ISR), (2, UPDATE_METADATA), (2, STOP_REPLICA),
        (3, UPDATE_METADATA)]
    lair = out[0].request
    assert lair.broker_epoch == 101 and lair.controller_epoch == 5
    assert lair.partition_states[0].zk_version == 11 and lair.partition_states[0].replicas == [1, 2, 4]
    assert lair.live_leaders == [LeaderAndIsrLiveLeader(1, "h", 9001)]
    um = out[1].request
    assert um.partition_states[0].offline_replicas == [4]
    assert [b.rack for b in um.live_brokers] == ["r1", "r2", "r3"]
    assert out[4].request.delete_partitions is True


def test_selectors_bump_the_epoch_and_compute_the_isr() -> None:
    ctx = context()
    tp = TopicPartition("t", 0)
    ctx.live_brokers.pop(1)
    offline = elect_leader(Election.OFFLINE, ctx, tp)
    assert isinstance(offline, Elected)
    assert (offline.new.leader, offline.new.leader_epoch, offline.new.isr) == (2, 8, (2,))
    assert offline.new.zk_version == 11 and offline.recipients == (2,)
    ctx.leadership[tp] = offline.new
    preferred = elect_leader(Election.PREFERRED, ctx, tp)
    assert isinstance(preferred, NotElected) and preferred.error is ErrorCode.preferred_leader_not_available
    ctx.shutting_down.add(2)
    shutdown = elect_leader(Election.CONTROLLED_SHUTDOWN, ctx, tp)
    assert isinstance(shutdown, NotElected) and shutdown.error is ErrorCode.eligible_leaders_not_available
    ctx.leadership[tp] = LeaderIsr(1, 7, (4,), 9, 11)
    newer = elect_leader(Election.OFFLINE, ctx, tp)
    assert isinstance(newer, NotElected) and newer.error is ErrorCode.not_controller


def test_removing_the_last_isr_member_keeps_it_in_the_isr() -> None:
    ctx = context()
    assert without_replica(ctx, LeaderIsr(1, 3, (1, 2), 5, 0), 1) == LeaderIsr(-1, 4, (2,), 5, 0)
    assert without_replica(ctx, LeaderIsr(1, 3, (1,), 5, 0), 1) == LeaderIsr(-1, 4, (1,), 5, 0)
    assert without_replica(ctx, LeaderIsr(1, 3, (1,), 5, 0), 2) is None


def test_partition_replica_names_its_partition() -> None:
    assert PartitionReplica("t", 1, 2).tp == TopicPartition("t", 1)


async def test_channels_retry_while_the_broker_lives_and_drop_when_it_is_removed() -> None:
    from odradek.controller.channels import ChannelManager

    attempts: dict[int, int] = {1: 0, 2: 0}
    answered: list[tuple[int, object]] = []

    class Flaky:
        async def send(self, broker_id: int, endpoint: Endpoint, api_key: int, body: bytes) -> bytes:
            attempts[broker_id] += 1
            if broker_id == 2 or attempts[broker_id] < 3:
                raise ConnectionRefusedError("not yet")
            return encode_body(LeaderAndIsrResponse(0, []))

    channels = ChannelManager(Flaky(), retry_backoff_ms=1, max_backoff_ms=2)
    channels.add_broker(1, Endpoint("PLAINTEXT", "h", 1))
    channels.add_broker(2, Endpoint("PLAINTEXT", "h", 2))
    channels.send(1, LEADER_AND_ISR, LAIR, lambda b, r: answered.append((b, r)))
    channels.send(2, LEADER_AND_ISR, LAIR, lambda b, r: answered.append((b, r)))
    assert not channels.send(3, LEADER_AND_ISR, LAIR)  # no channel: not live
    deadline = asyncio.get_running_loop().time() + 10
    while not answered or attempts[2] < 5:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.005)
    assert answered == [(1, LeaderAndIsrResponse(0, []))] and attempts[1] == 3
    channels.remove_broker(2)  # the broker died: its queue is dropped and its sender stops retrying
    assert channels.brokers == {1}
    await channels.close()  # returns only once every sender, the removed one included, has ended
    assert answered == [(1, LeaderAndIsrResponse(0, []))]


async def test_a_request_kafkas_format_cannot_carry_is_dropped_and_the_queue_goes_on(caplog) -> None:
    from odradek.controller.channels import ChannelManager
    from odradek.protocol.controller_requests import MetadataBroker, MetadataEndpoint, UpdateMetadataRequest

    sent: list[int] = []

    class Recording:
        async def send(self, broker_id: int, endpoint: Endpoint, api_key: int, body: bytes) -> bytes:
            sent.append(api_key)
            return encode_body(LeaderAndIsrResponse(0, []))

    odd = UpdateMetadataRequest(0, 1, -1, [], [MetadataBroker(1, [MetadataEndpoint(1, "h", "IN", "NOT_A_PROTOCOL")])])
    answered: list[object] = []
    channels = ChannelManager(Recording(), retry_backoff_ms=1, max_backoff_ms=2)
    channels.add_broker(1, Endpoint("PLAINTEXT", "h", 1))
    with caplog.at_level(logging.ERROR, logger="odradek.controller.channels"):
        channels.send(1, UPDATE_METADATA, odd, lambda b, r: answered.append(r))
        channels.send(1, LEADER_AND_ISR, LAIR, lambda b, r: answered.append(r))
        deadline = asyncio.get_running_loop().time() + 10
        while not answered:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.005)
    assert sent == [LEADER_AND_ISR] and answered == [LeaderAndIsrResponse(0, [])]
    assert any("cannot be encoded; dropped" in r.getMessage() for r in caplog.records)
    await channels.close()
