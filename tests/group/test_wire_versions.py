"""Every advertised version of the ten group APIs, spoken on the wire to a real broker.

Real clients each use one version per API (see shared/notes/kafka-wire.md); this walks a whole group lifecycle once
per JoinGroup version 0-9, choosing the other APIs' versions so that together every version the broker advertises
is sent and its answer decoded by kio: FindCoordinator 0-6, JoinGroup 0-9, SyncGroup 0-5, Heartbeat 0-4,
LeaveGroup 0-5, OffsetCommit 2-9, OffsetFetch 1-9, ListGroups 0-5, DescribeGroups 0-6, DeleteGroups 0-2.
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
import struct
import sys
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from brokers import BrokerProcess
from odradek.errors import ErrorCode

E = ErrorCode
MS = datetime.timedelta(milliseconds=1)
TOPIC = "wire-topic"


def fit(cls: type[Any], **values: Any) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


class RawClient:
    """One connection; requests encoded by kio exactly as a client's library would."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def nested(self, api: int, version: int, entity: str, /, **values: Any) -> Any:
        module = sys.modules[load_request_schema(api, version).__module__]
        return fit(getattr(module, entity), **values)

    def call(self, api: int, version: int, /, **values: Any) -> Any:
        cls = load_request_schema(api, version)
        self.correlation_id += 1
        header_cls = cls.__header_schema__
        header = fit(
            header_cls,
            request_api_key=api,
            request_api_version=version,
            correlation_id=self.correlation_id,
            client_id="wire-test",
        )
        body = bytearray()

        class Sink:
            def write(self, data: bytes) -> None:
                body.extend(data)

        entity_writer(header_cls)(Sink(), header)  # type: ignore[arg-type]
        entity_writer(cls)(Sink(), fit(cls, **values))  # type: ignore[arg-type]
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", self._recv(4))
        frame = self._recv(size)
        response_cls = load_response_schema(api, version)
        header_out, offset = entity_reader(response_cls.__header_schema__)(frame, 0)
        assert header_out.correlation_id == self.correlation_id
        response, used = entity_reader(response_cls)(frame, offset)
        assert offset + used == len(frame), f"api {api} v{version}: {len(frame) - offset - used} bytes left over"
        return response

    def _recv(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            assert chunk, "broker closed the connection"
            data += chunk
        return bytes(data)


def create_topic(client: RawClient) -> None:
    topic = client.nested(
        19, 4, "CreatableTopic", name=TOPIC, num_partitions=1, replication_factor=1, assignments=(), configs=()
    )
    result = client.call(19, 4, topics=(topic,), timeout=30_000 * MS, validate_only=False)
    assert result.topics[0].error_code in (E.none, E.topic_already_exists)


def find_coordinator(client: RawClient, version: int, group: str, broker: BrokerProcess) -> None:
    response = client.call(10, version, key=group, key_type=0, coordinator_keys=(group,))
    if version >= 4:
        (found,) = response.coordinators
        assert found.key == group
    else:
        found = response
    assert found.error_code is E.none
    assert f"{found.host}:{found.port}" == broker.bootstrap


def lifecycle(client: RawClient, v: int, broker: BrokerProcess) -> None:
    group = f"wire-group-v{v}"
    find_coordinator(client, min(v, 6), group, broker)

    protocol = client.nested(11, v, "JoinGroupRequestProtocol", name="range", metadata=b"\x00\x01")
    join_args = dict(
        group_id=group,
        session_timeout=10_000 * MS,
        rebalance_timeout=10_000 * MS,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(protocol,),
        reason=None,
    )
    joined = client.call(11, v, **join_args)
    if v >= 4:
        assert joined.error_code is E.member_id_required
        joined = client.call(11, v, **(join_args | {"member_id": joined.member_id}))
    assert joined.error_code is E.none, joined
    member = joined.member_id
    assert member.startswith("wire-test-")
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (1, member, "range")
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, b"\x00\x01")]

    sv = min(v, 5)
    assignment = client.nested(14, sv, "SyncGroupRequestAssignment", member_id=member, assignment=b"mine")
    synced = client.call(
        14,
        sv,
        group_id=group,
        generation_id=1,
        member_id=member,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(assignment,),
    )
    assert (synced.error_code, synced.assignment) == (E.none, b"mine")

    beat = client.call(12, min(v, 4), group_id=group, generation_id=1, member_id=member, group_instance_id=None)
    assert beat.error_code is E.none
    stale = client.call(12, min(v, 4), group_id=group, generation_id=7, member_id=member, group_instance_id=None)
    assert stale.error_code is E.illegal_generation

    cv = 2 + v % 8
    partition = client.nested(
        8,
        cv,
        "OffsetCommitRequestPartition",
        partition_index=0,
        committed_offset=100 + v,
        committed_leader_epoch=-1,
        committed_metadata=f"v{v}",
    )
    ghost = client.nested(
        8,
        cv,
        "OffsetCommitRequestPartition",
        partition_index=5,
        committed_offset=1,
        committed_leader_epoch=-1,
        committed_metadata=None,
    )
    topic = client.nested(8, cv, "OffsetCommitRequestTopic", name=TOPIC, partitions=(partition, ghost))
    committed = client.call(
        8,
        cv,
        group_id=group,
        generation_id_or_member_epoch=1,
        member_id=member,
        group_instance_id=None,
        retention_time=-1 * MS,
        topics=(topic,),
    )
    assert [p.error_code for p in committed.topics[0].partitions] == [E.none, E.unknown_topic_or_partition]

    fv = 1 + v % 9
    if fv >= 8:
        wanted = client.nested(9, fv, "OffsetFetchRequestTopics", name=TOPIC, partition_indexes=(0, 1))
        request_group = client.nested(
            9, fv, "OffsetFetchRequestGroup", group_id=group, topics=(wanted,), member_id=None, member_epoch=-1
        )
        fetched = client.call(9, fv, groups=(request_group,), require_stable=False)
        (answer,) = fetched.groups
        assert answer.error_code is E.none
        topics = answer.topics
    else:
        wanted = client.nested(9, fv, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=(0, 1))
        fetched = client.call(9, fv, group_id=group, topics=(wanted,), require_stable=False)
        topics = fetched.topics
    (fetched_topic,) = topics
    assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in fetched_topic.partitions] == [
        (0, 100 + v, f"v{v}", E.none),
        (1, -1, "", E.none),
    ]

    dv = min(v, 6)
    described = client.call(15, dv, groups=(group,), include_authorized_operations=True)
    (desc,) = described.groups
    assert (desc.error_code, desc.group_state, desc.protocol_type, desc.protocol_data) == (
        E.none,
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.client_id, m.member_metadata, m.member_assignment) for m in desc.members] == [
        (member, "wire-test", b"\x00\x01", b"mine")
    ]

    lv = min(v, 5)
    listed = client.call(16, lv, states_filter=("Stable",) if lv >= 4 else (), types_filter=())
    assert listed.error_code is E.none
    assert group in {g.group_id for g in listed.groups}

    if lv >= 3:
        identity = client.nested(13, lv, "MemberIdentity", member_id=member, group_instance_id=None, reason="done")
        left = client.call(13, lv, group_id=group, members=(identity,))
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, E.none)]
    else:
        left = client.call(13, lv, group_id=group, member_id=member)
    assert left.error_code is E.none

    deleted = client.call(42, v % 3, groups_names=(group, "never-existed"))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        (group, E.none),
        ("never-existed", E.group_id_not_found),
    ]
    gone = client.call(15, dv, groups=(group,), include_authorized_operations=False)
    assert gone.groups[0].group_state == "Dead"
    assert gone.groups[0].error_code is (E.group_id_not_found if dv >= 6 else E.none)


def test_every_group_api_version(broker: BrokerProcess) -> None:
    client = RawClient(broker.bootstrap)
    try:
        create_topic(client)
        for v in range(10):
            lifecycle(client, v, broker)
        # A transactional id's coordinator is the leader of its __transaction_state partition (issue 10).
        txn = client.call(10, 3, key="txn-1", key_type=1)
        assert (txn.error_code, txn.port) == (E.none, broker.port)
    finally:
        client.close()
