"""Every API checks the request's principal as Kafka's KafkaApis does: real handlers on a real two-broker cluster,
called with a request context carrying ``User:alice``, ``User:bob`` or the super user ``User:admin``.

The ACLs (made with the admin client, as ANONYMOUS, a super user here):

* alice: READ+WRITE on topic ``orders``; WRITE and CREATE on topics prefixed ``pfx-``; READ on group ``g1``;
  WRITE on transactional id ``tx1``;
* everyone (``User:*``): READ on topic ``public``, but bob is DENIED READ there;
* nobody but super users: topic ``secret``.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from acl_support import call, ns, wait_for
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kafka_clients import opened
from odradek.errors import ErrorCode
from odradek.protocol import controller_requests as creq
from odradek.protocol.records import encode_batch
from odradek.testing import ThreadedCluster

ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"
TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed
CLUSTER_DENIED = ErrorCode.cluster_authorization_failed
TXN_DENIED = ErrorCode.transactional_id_authorization_failed
SECOND = datetime.timedelta(seconds=1)
LIT, PFX = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


@pytest.fixture(scope="module")
def cluster(secured: ThreadedCluster) -> Iterator[ThreadedCluster]:
    admin = opened(AdminClient({"bootstrap.servers": secured.bootstrap}))
    for f in admin.create_topics([NewTopic(t, 1, 2) for t in ("orders", "public", "secret", "pfx-a")]).values():
        f.result(30)
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    acls = [
        AclBinding(ResourceType.TOPIC, "orders", LIT, ALICE, "*", AclOperation.READ, allow),
        AclBinding(ResourceType.TOPIC, "orders", LIT, ALICE, "*", AclOperation.WRITE, allow),
        AclBinding(ResourceType.TOPIC, "pfx-", PFX, ALICE, "*", AclOperation.WRITE, allow),
        AclBinding(ResourceType.TOPIC, "pfx-", PFX, ALICE, "*", AclOperation.CREATE, allow),
        AclBinding(ResourceType.GROUP, "g1", LIT, ALICE, "*", AclOperation.READ, allow),
        AclBinding(ResourceType.TRANSACTIONAL_ID, "tx1", LIT, ALICE, "*", AclOperation.WRITE, allow),
        AclBinding(ResourceType.TOPIC, "public", LIT, "User:*", "*", AclOperation.READ, allow),
        AclBinding(ResourceType.TOPIC, "public", LIT, BOB, "*", AclOperation.READ, deny),
    ]
    for f in admin.create_acls(acls, request_timeout=30).values():
        f.result()
    # both brokers know every topic and every ACL
    wait_for(lambda: secured.run(lambda: all(
        {"orders", "public", "secret", "pfx-a"} <= set(b.metadata.topics)
        and len(list(b.authorizer.index.bindings())) >= len(acls) for b in secured.cluster.brokers.values())))
    return secured


def _leader(cluster: ThreadedCluster, topic: str) -> int:
    def find() -> int:
        leader = cluster.cluster.brokers[0].metadata.leader_for(topic, 0)
        return -1 if leader is None else leader
    wait_for(lambda: cluster.run(find) >= 0)
    return cluster.run(find)


def _produce(cluster: ThreadedCluster, principal: str, topic: str, transactional_id: str | None = None,
             batch: bytes | None = None) -> ErrorCode:
    # a current timestamp: a record of 1970 is past retention.ms, and the next retention pass deletes it (with its
    # segment, rolled for that), moving the log start offset past the offsets the fetch tests read
    records = batch or bytes(encode_batch([(b"k", b"v", ())], timestamp_ms=int(time.time() * 1000)))
    request = ns(acks=1, timeout=5 * SECOND, transactional_id=transactional_id,
                 topic_data=[ns(name=topic, partition_data=[ns(index=0, records=records)])])
    response = call(cluster, principal, 0, 9, request, broker=_leader(cluster, topic))
    return response.responses[0].partition_responses[0].error_code


def _fetch(cluster: ThreadedCluster, principal: str, topic: str, replica_id: int = -1) -> ErrorCode:
    request = ns(replica_id=replica_id, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                 topics=[ns(topic=topic, partitions=[
                     ns(partition=0, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                        log_start_offset=-1)])])
    response = call(cluster, principal, 1, 12, request, broker=_leader(cluster, topic))
    return response.responses[0].partitions[0].error_code


def _metadata(cluster: ThreadedCluster, principal: str, names: list[str] | None, create: bool = False,
              operations: bool = False) -> Any:
    topics = None if names is None else [ns(name=n, topic_id=None) for n in names]
    request = ns(topics=topics, allow_auto_topic_creation=create, include_topic_authorized_operations=operations)
    return call(cluster, principal, 3, 12, request).topics


def test_produce_needs_write_on_the_topic(cluster: ThreadedCluster) -> None:
    assert _produce(cluster, ALICE, "orders") == ErrorCode.none
    assert _produce(cluster, BOB, "orders") == TOPIC_DENIED
    assert _produce(cluster, ALICE, "pfx-a") == ErrorCode.none  # a prefixed ACL
    assert _produce(cluster, ALICE, "secret") == TOPIC_DENIED
    assert _produce(cluster, ADMIN, "secret") == ErrorCode.none  # a super user needs no ACL


def test_transactional_produce_needs_write_on_the_transactional_id(cluster: ThreadedCluster) -> None:
    batch = bytes(encode_batch([(b"k", b"v", ())], timestamp_ms=int(time.time() * 1000), producer_id=7,
                               producer_epoch=0, base_sequence=0, transactional=True))
    assert _produce(cluster, ALICE, "orders", "tx-other", batch) == TXN_DENIED
    assert _produce(cluster, ALICE, "orders", None, batch) == TXN_DENIED
    # allowed on tx1, the produce gets past authorization (the coordinator then refuses: nothing was added)
    assert _produce(cluster, ALICE, "orders", "tx1", batch) not in (TXN_DENIED, TOPIC_DENIED)


def test_fetch_needs_read_and_deny_beats_allow(cluster: ThreadedCluster) -> None:
    assert _fetch(cluster, ALICE, "public") == ErrorCode.none  # User:* is allowed
    assert _fetch(cluster, "User:carol", "public") == ErrorCode.none
    assert _fetch(cluster, BOB, "public") == TOPIC_DENIED  # DENY bob overrides ALLOW User:*
    assert _fetch(cluster, ALICE, "secret") == TOPIC_DENIED
    follower = 1 - _leader(cluster, "orders")  # two brokers; a replica's fetch comes from the one not leading
    assert _fetch(cluster, ALICE, "orders", replica_id=follower) == TOPIC_DENIED  # needs CLUSTER_ACTION
    assert _fetch(cluster, ADMIN, "orders", replica_id=follower) == ErrorCode.none


def test_metadata_hides_what_the_principal_may_not_describe(cluster: ThreadedCluster) -> None:
    visible = {t.name for t in _metadata(cluster, ALICE, None)}
    assert {"orders", "public", "pfx-a"} <= visible
    assert "secret" not in visible
    # bob sees "public" only: User:*'s ALLOW READ implies DESCRIBE, and his DENY READ does not deny DESCRIBE (Kafka)
    assert {t.name for t in _metadata(cluster, BOB, None)} == {"public"}
    named = {t.name: t for t in _metadata(cluster, ALICE, ["secret", "orders"])}
    assert named["secret"].error_code == TOPIC_DENIED and not named["secret"].partitions
    assert named["orders"].error_code == ErrorCode.none and named["orders"].partitions
    assert {t.name for t in _metadata(cluster, ADMIN, None)} >= {"orders", "public", "secret", "pfx-a"}
    # v8+ authorized operations: alice's READ and WRITE on orders, and the DESCRIBE they imply
    [orders] = _metadata(cluster, ALICE, ["orders"], operations=True)
    assert orders.topic_authorized_operations == (1 << 3) | (1 << 4) | (1 << 8)


def test_metadata_auto_creation_needs_create(cluster: ThreadedCluster) -> None:
    created = _metadata(cluster, ALICE, ["pfx-auto"], create=True)[0]
    assert created.error_code in (ErrorCode.none, ErrorCode.leader_not_available)
    refused = _metadata(cluster, ALICE, ["orders-auto"], create=True)[0]
    assert refused.error_code == TOPIC_DENIED
    assert cluster.run(lambda: "orders-auto" not in cluster.cluster.brokers[0].metadata.topics)


def test_group_apis_need_the_group(cluster: ThreadedCluster) -> None:
    join = ns(group_id="g1", session_timeout=10 * SECOND, rebalance_timeout=10 * SECOND, member_id="",
              group_instance_id=None, protocol_type="consumer", protocols=[ns(name="range", metadata=b"")])
    assert call(cluster, BOB, 11, 5, join).error_code == GROUP_DENIED
    heartbeat = ns(group_id="g1", generation_id=1, member_id="m", group_instance_id=None)
    assert call(cluster, BOB, 12, 4, heartbeat).error_code == GROUP_DENIED
    sync = ns(group_id="g1", generation_id=1, member_id="m", group_instance_id=None, assignments=[])
    assert call(cluster, BOB, 14, 3, sync).error_code == GROUP_DENIED
    leave = ns(group_id="g1", members=[ns(member_id="m", group_instance_id=None)])
    assert call(cluster, BOB, 13, 3, leave).error_code == GROUP_DENIED
    delete = call(cluster, ALICE, 42, 2, ns(groups_names=["g1"]))  # alice may READ g1, not DELETE it
    assert delete.results[0].error_code == GROUP_DENIED
    key = ns(key_type=0, coordinator_keys=["g1"])
    assert call(cluster, BOB, 10, 4, key).coordinators[0].error_code == GROUP_DENIED
    assert call(cluster, ALICE, 10, 4, key).coordinators[0].error_code != GROUP_DENIED


def _commit(cluster: ThreadedCluster, principal: str, group: str) -> dict[str, ErrorCode]:
    commit = ns(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=[ns(name=t, partitions=[ns(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                                  committed_metadata="")]) for t in ("orders", "secret")])
    coordinator = cluster.run(lambda: cluster.cluster.brokers[0].metadata.leader_for(
        "__consumer_offsets", cluster.cluster.brokers[0].groups.partition_for(group)))
    response = call(cluster, principal, 8, 8, commit, broker=coordinator or 0)
    return {t.name: t.partitions[0].error_code for t in response.topics}


def test_offset_commit_and_fetch_check_group_and_topics(cluster: ThreadedCluster) -> None:
    FindCoordinator = ns(key_type=0, coordinator_keys=["g1"])
    call(cluster, ADMIN, 10, 4, FindCoordinator)
    wait_for(lambda: cluster.run(lambda: cluster.cluster.brokers[0].metadata.leader_for(
        "__consumer_offsets", cluster.cluster.brokers[0].groups.partition_for("g1")) is not None))
    assert set(_commit(cluster, BOB, "g1").values()) == {GROUP_DENIED}
    wait_for(lambda: _commit(cluster, ALICE, "g1")["orders"] == ErrorCode.none)
    assert _commit(cluster, ALICE, "g1")["secret"] == TOPIC_DENIED
    coordinator = cluster.run(lambda: cluster.cluster.brokers[0].metadata.leader_for(
        "__consumer_offsets", cluster.cluster.brokers[0].groups.partition_for("g1")))
    fetch_all = ns(require_stable=False, groups=[ns(group_id="g1", topics=None)])
    group = call(cluster, ALICE, 9, 8, fetch_all, broker=coordinator).groups[0]
    assert group.error_code == ErrorCode.none
    assert [t.name for t in group.topics] == ["orders"]
    named = ns(require_stable=False, groups=[ns(group_id="g1", topics=[ns(name="secret", partition_indexes=[0])])])
    group = call(cluster, ALICE, 9, 8, named, broker=coordinator).groups[0]
    assert group.topics[0].partitions[0].error_code == TOPIC_DENIED
    denied = call(cluster, BOB, 9, 8, fetch_all, broker=coordinator).groups[0]
    assert denied.error_code == GROUP_DENIED


def test_list_groups_shows_only_describable_groups(cluster: ThreadedCluster) -> None:
    def listed(principal: str) -> set[str]:
        found: set[str] = set()
        for broker_id in (0, 1):
            answer = call(cluster, principal, 16, 4, ns(states_filter=()), broker=broker_id)
            found |= {g.group_id for g in answer.groups}
        return found

    wait_for(lambda: "g1" in listed(ADMIN))
    assert "g1" in listed(ALICE)  # READ on g1 implies DESCRIBE
    assert "g1" not in listed(BOB)


def test_admin_apis(cluster: ThreadedCluster) -> None:
    create = ns(timeout=5 * SECOND, validate_only=True, topics=[
        ns(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[]) for n in ("pfx-b", "other")])
    results = {t.name: t for t in call(cluster, ALICE, 19, 5, create).topics}
    assert results["pfx-b"].error_code == ErrorCode.none
    assert results["pfx-b"].topic_config_error_code == TOPIC_DENIED  # no DESCRIBE_CONFIGS on it
    assert results["other"].error_code == TOPIC_DENIED
    delete = call(cluster, ALICE, 20, 4, ns(timeout=SECOND, topic_names=["orders"]))
    assert delete.responses[0].error_code == TOPIC_DENIED
    partitions = ns(timeout=SECOND, validate_only=True, topics=[ns(name="orders", count=3, assignments=None)])
    assert call(cluster, ALICE, 37, 2, partitions).results[0].error_code == TOPIC_DENIED
    describe = ns(include_synonyms=False, include_documentation=False, resources=[
        ns(resource_type=2, resource_name="orders", configuration_keys=None),
        ns(resource_type=4, resource_name="0", configuration_keys=None)])
    assert [r.error_code for r in call(cluster, ALICE, 32, 4, describe).results] == [TOPIC_DENIED, CLUSTER_DENIED]
    assert [r.error_code for r in call(cluster, ADMIN, 32, 4, describe).results] == [ErrorCode.none] * 2
    records = ns(timeout=SECOND, topics=[ns(name="orders", partitions=[ns(partition_index=0, offset=0)])])
    leader = _leader(cluster, "orders")
    assert call(cluster, ALICE, 21, 2, records, broker=leader).topics[0].partitions[0].error_code == TOPIC_DENIED
    elect = ns(election_type=0, topic_partitions=[ns(topic="orders", partitions=[0])], timeout=SECOND)
    assert call(cluster, ALICE, 43, 2, elect).error_code == CLUSTER_DENIED
    assert call(cluster, ALICE, 35, 4, ns(topics=None)).error_code == CLUSTER_DENIED
    acls = ns(creations=[ns(resource_type=2, resource_name="x", resource_pattern_type=3, principal=ALICE, host="*",
                            operation=2, permission_type=3)])
    assert call(cluster, ALICE, 30, 3, acls).results[0].error_code == CLUSTER_DENIED
    everything = ns(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                    host_filter=None, operation=1, permission_type=1)
    assert call(cluster, ALICE, 29, 3, everything).error_code == CLUSTER_DENIED
    assert call(cluster, ALICE, 31, 3, ns(filters=[everything])).filter_results[0].error_code == CLUSTER_DENIED


def test_transaction_apis(cluster: ThreadedCluster) -> None:
    def init(principal: str, tid: str | None) -> ErrorCode:
        request = ns(transactional_id=tid, transaction_timeout=10 * SECOND, producer_id=-1, producer_epoch=-1)
        return call(cluster, principal, 22, 4, request).error_code

    assert init(BOB, "tx1") == TXN_DENIED
    assert init(ALICE, "tx1") != TXN_DENIED
    assert init(BOB, None) == CLUSTER_DENIED  # no IDEMPOTENT_WRITE, no WRITE on any topic
    assert init(ALICE, None) == ErrorCode.none  # WRITE on some topic is enough (KIP-679)
    end = ns(transactional_id="tx1", producer_id=1, producer_epoch=0, committed=True)
    assert call(cluster, BOB, 26, 3, end).error_code == TXN_DENIED
    offsets = ns(transactional_id="tx1", producer_id=1, producer_epoch=0, group_id="g-other")
    assert call(cluster, ALICE, 25, 3, offsets).error_code == GROUP_DENIED
    add = ns(v3_and_below_transactional_id="tx1", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
             v3_and_below_topics=[ns(name="orders", partitions=[0]), ns(name="secret", partitions=[0])])
    results = {t.name: t.results_by_partition[0].partition_error_code
               for t in call(cluster, ALICE, 24, 3, add).results_by_topic_v3_and_below}
    assert results == {"orders": ErrorCode.operation_not_attempted, "secret": TOPIC_DENIED}
    add_v4 = ns(transactions=[])
    assert call(cluster, ALICE, 24, 4, add_v4).error_code == CLUSTER_DENIED  # broker-to-broker only
    key = ns(key_type=1, coordinator_keys=["tx1"])
    assert call(cluster, BOB, 10, 4, key).coordinators[0].error_code == TXN_DENIED
    listed = call(cluster, BOB, 66, 0, ns(producer_id_filters=(), state_filters=()))
    assert all(t.transactional_id != "tx1" for t in listed.transaction_states)


def test_controller_requests_need_cluster_action(cluster: ThreadedCluster) -> None:
    state = creq.LeaderAndIsrPartitionState("orders", 0, 99, 0, 99, [0, 1], 0, [0, 1])
    leader_and_isr = creq.LeaderAndIsrRequest(0, 99, 0, [state], [])
    answer = call(cluster, ALICE, creq.LEADER_AND_ISR, creq.VERSIONS[creq.LEADER_AND_ISR], leader_and_isr)
    assert answer.error_code == CLUSTER_DENIED and answer.partition_errors[0].error_code == CLUSTER_DENIED
    stop = creq.StopReplicaRequest(0, 99, 0, True, [creq.StopReplicaPartition("orders", 0)])
    assert call(cluster, ALICE, creq.STOP_REPLICA, creq.VERSIONS[creq.STOP_REPLICA], stop).error_code == CLUSTER_DENIED
    assert cluster.run(lambda: "orders" in cluster.cluster.brokers[0].metadata.topics)
    markers = ns(markers=[ns(producer_id=1, producer_epoch=0, coordinator_epoch=0, transaction_result=True,
                             topics=[ns(name="orders", partition_indexes=[0])])])
    answer = call(cluster, ALICE, 27, 1, markers)
    assert answer.markers[0].topics[0].partitions[0].error_code == CLUSTER_DENIED


def test_a_new_acl_takes_effect_at_once(cluster: ThreadedCluster) -> None:
    assert _fetch(cluster, "User:erin", "secret") == TOPIC_DENIED  # the denial is cached now
    admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
    erin = AclBinding(ResourceType.TOPIC, "secret", LIT, "User:erin", "*", AclOperation.READ, AclPermissionType.ALLOW)
    for f in admin.create_acls([erin], request_timeout=30).values():
        f.result()
    seen: list[ErrorCode] = []
    try:
        wait_for(lambda: seen.append(_fetch(cluster, "User:erin", "secret")) or seen[-1] == ErrorCode.none)
    except AssertionError as exc:
        raise AssertionError(f"erin's fetch still refused: last answers {seen[-3:]}") from exc


def test_acl_requests_with_unknown_codes_close_the_connection(cluster: ThreadedCluster) -> None:
    from odradek.protocol.framing import FrameError

    unknown_type = ns(resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1,
                      principal_filter=None, host_filter=None, operation=1, permission_type=1)
    with pytest.raises(FrameError, match="UNKNOWN"):
        call(cluster, ADMIN, 29, 3, unknown_type)
    out_of_range = ns(creations=[ns(resource_type=2, resource_name="x", resource_pattern_type=3, principal=ALICE,
                                    host="*", operation=99, permission_type=3)])
    with pytest.raises(FrameError, match="UNKNOWN"):
        call(cluster, ADMIN, 30, 3, out_of_range)
    # ANY where an ACL must be definite is an answer, not a closed connection: INVALID_REQUEST for that one
    any_operation = ns(creations=[ns(resource_type=2, resource_name="x", resource_pattern_type=3, principal=ALICE,
                                     host="*", operation=1, permission_type=3)])
    assert call(cluster, ADMIN, 30, 3, any_operation).results[0].error_code == ErrorCode.invalid_request
