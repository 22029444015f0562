"""ConsumerGroupHeartbeat / ConsumerGroupDescribe / OffsetCommit v9 on the wire against a live broker.

Raw requests give exact control: Kafka's error codes for bad input (wrong member epoch, unknown member, unknown
assignor, a join without its required fields), STALE_MEMBER_EPOCH for offsets committed with an old epoch, a regex
subscription that picks up a topic created later, and the group (epochs, assignments, committed offsets) resumed
from ``__consumer_offsets`` after a broker restart.
"""

from __future__ import annotations

import datetime
import importlib
import uuid
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

HEARTBEAT, DESCRIBE, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 68, 69, 8, 9, 10


def _mod(api: str, version: int, kind: str = "request") -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def heartbeat(
    conn: KafkaConnection,
    group: str,
    member: str,
    epoch: int,
    *,
    topics: tuple[str, ...] | None = None,
    regex: str | None = None,
    owned: Any = None,
    assignor: str | None = None,
    rebalance_ms: int = -1,
) -> Any:
    mod = _mod("consumer_group_heartbeat", 1)
    request = mod.ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rebalance_timeout=datetime.timedelta(milliseconds=rebalance_ms),
        subscribed_topic_names=topics,
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=owned,
    )
    return conn.request(HEARTBEAT, request, 1)


def join(conn: KafkaConnection, group: str, member: str, **kw: Any) -> Any:
    return heartbeat(conn, group, member, 0, owned=(), rebalance_ms=30_000, **kw)


def owned_of(response: Any) -> tuple[Any, ...]:
    """The assignment a response gave, as the owned partitions of the next heartbeat."""
    mod = _mod("consumer_group_heartbeat", 1)
    return tuple(
        mod.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
        for tp in response.assignment.topic_partitions
    )


def describe(conn: KafkaConnection, group: str) -> Any:
    return conn.request(
        DESCRIBE,
        _mod("consumer_group_describe", 0).ConsumerGroupDescribeRequest(
            group_ids=(group,), include_authorized_operations=False
        ),
        0,
    ).groups[0]


def assigned(described: Any) -> dict[str, set[tuple[str, int]]]:
    return {
        m.member_id: {(tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions}
        for m in described.members
    }


def commit(conn: KafkaConnection, group: str, member: str, epoch: int, topic: str, offset: int) -> ErrorCode:
    mod = _mod("offset_commit", 9)
    request = mod.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        topics=(
            mod.OffsetCommitRequestTopic(
                name=topic,
                partitions=(
                    mod.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_metadata=""),
                ),
            ),
        ),
    )
    return ErrorCode(conn.request(OFFSET_COMMIT, request, 9).topics[0].partitions[0].error_code)


def committed(conn: KafkaConnection, group: str, topic: str) -> int:
    mod = _mod("offset_fetch", 7)
    request = mod.OffsetFetchRequest(
        group_id=group, topics=(mod.OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),)
    )
    return int(conn.request(OFFSET_FETCH, request, 7).topics[0].partitions[0].committed_offset)


def coordinator_ready(conn: KafkaConnection, group: str) -> bool:
    mod = _mod("find_coordinator", 3)
    return conn.request(FIND_COORDINATOR, mod.FindCoordinatorRequest(key=group), 3).error_code == ErrorCode.none


def test_bad_input_offsets_regex_and_restart(broker_factory: Any) -> None:
    broker: BrokerProcess = broker_factory("--override", "log.flush.interval.messages=1")
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    suffix = uuid.uuid4().hex[:6]
    topic, group, rx_group = f"w-{suffix}", f"g-{suffix}", f"rx-{suffix}"
    admin.create_topics([NewTopic(topic, 4, 1)])[topic].result(30)
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    with KafkaConnection(broker.bootstrap) as conn:
        # ApiVersions v3+ advertises both APIs and group.version finalized at 1, as Kafka 4.0 brokers do.
        versions = conn.request(
            18, _mod("api_versions", 3).ApiVersionsRequest(client_software_name="test", client_software_version="1"), 3
        )
        assert {int(k.api_key): int(k.max_version) for k in versions.api_keys}.items() >= {68: 1, 69: 1}.items()
        assert [(f.name, f.max_version_level) for f in versions.finalized_features] == [("group.version", 1)]
        wait_for(lambda: coordinator_ready(conn, group) and coordinator_ready(conn, rx_group), what="coordinator")
        # Bad input gets Kafka's codes.
        assert (
            ErrorCode(join(conn, group, a, topics=(topic,), assignor="bogus").error_code)
            is ErrorCode.unsupported_assignor
        )
        assert (
            ErrorCode(heartbeat(conn, group, a, 0, topics=(topic,), owned=()).error_code) is ErrorCode.invalid_request
        )  # no rebalance timeout on a join
        # no such group yet: Kafka 4's GROUP_ID_NOT_FOUND (differential: consumer-group-heartbeat.v0.unknown-member)
        assert ErrorCode(heartbeat(conn, group, a, 3).error_code) is ErrorCode.group_id_not_found

        first = join(conn, group, a, topics=(topic,))
        assert ErrorCode(first.error_code) is ErrorCode.none and first.member_epoch == 1
        assert {int(p) for tp in first.assignment.topic_partitions for p in tp.partitions} == {0, 1, 2, 3}
        assert ErrorCode(heartbeat(conn, group, a, 7).error_code) is ErrorCode.fenced_member_epoch
        assert ErrorCode(heartbeat(conn, group, "ghost", 1).error_code) is ErrorCode.unknown_member_id

        # A second member: a keeps epoch 1 until it revokes half its partitions; b waits for them.
        second = join(conn, group, b, topics=(topic,))
        assert second.member_epoch == 2 and not second.assignment.topic_partitions
        revoke = heartbeat(conn, group, a, 1, owned=owned_of(first))
        assert revoke.member_epoch == 1 and sum(len(tp.partitions) for tp in revoke.assignment.topic_partitions) == 2
        # The epoch has not moved: committing with the next one is stale, with the current one fine.
        assert commit(conn, group, a, 2, topic, 5) is ErrorCode.stale_member_epoch
        assert commit(conn, group, a, 1, topic, 5) is ErrorCode.none
        done = heartbeat(conn, group, a, 1, owned=owned_of(revoke))
        assert done.member_epoch == 2
        got = heartbeat(conn, group, b, 2, owned=())
        assert sum(len(tp.partitions) for tp in got.assignment.topic_partitions) == 2
        before = describe(conn, group)
        assert before.group_epoch == 2 and before.assignor_name == "uniform"
        assert set().union(*assigned(before).values()) == {(topic, p) for p in range(4)}

        # An empty classic group (offsets only, committed by a standalone consumer) converts to the consumer
        # protocol on its first heartbeat, keeping its offsets.
        classic = f"classic-{suffix}"
        wait_for(lambda: coordinator_ready(conn, classic), what="coordinator")
        assert commit(conn, classic, "", -1, topic, 9) is ErrorCode.none
        assert join(conn, classic, a, topics=(topic,)).member_epoch == 1
        assert committed(conn, classic, topic) == 9
        assert ErrorCode(describe(conn, classic).error_code) is ErrorCode.none

        # Regex: a topic created later joins the subscription on the next heartbeat.
        first_rx = f"{rx_group}-one"
        admin.create_topics([NewTopic(first_rx, 2, 1)])[first_rx].result(30)
        r1 = join(conn, rx_group, a, regex=f"{rx_group}-.*")
        assert r1.member_epoch == 1
        second_rx = f"{rx_group}-two"
        admin.create_topics([NewTopic(second_rx, 1, 1)])[second_rx].result(30)

        def picked_up() -> bool:
            answer = heartbeat(conn, rx_group, a, int(describe(conn, rx_group).members[0].member_epoch))
            return answer.member_epoch == 2

        wait_for(picked_up, what="regex subscription picks up the new topic")
        assert assigned(describe(conn, rx_group))[a] == {(first_rx, 0), (first_rx, 1), (second_rx, 0)}

    broker.restart()
    with KafkaConnection(broker.bootstrap) as conn:
        wait_for(lambda: coordinator_ready(conn, group), what="coordinator after restart")
        wait_for(lambda: ErrorCode(describe(conn, group).error_code) is ErrorCode.none, what="group loaded")
        after = describe(conn, group)
        assert (after.group_epoch, after.assignment_epoch) == (2, 2)
        assert assigned(after) == assigned(before)
        assert {m.member_id: m.member_epoch for m in after.members} == {a: 2, b: 2}
        assert committed(conn, group, topic) == 5
        # The members carry on at their epochs: no fencing, no rebalance.
        assert ErrorCode(heartbeat(conn, group, a, 2).error_code) is ErrorCode.none
        assert describe(conn, group).group_epoch == 2
        # Leaving hands the partitions to the other member.
        assert heartbeat(conn, group, b, -1).member_epoch == -1
        assert heartbeat(conn, group, a, 2).member_epoch == 3
        assert assigned(describe(conn, group))[a] == {(topic, p) for p in range(4)}
