"""ACLs in the coordination store as Kafka's ZooKeeper-era brokers keep them (ZkAclStore, AclEntry)."""

from __future__ import annotations

import asyncio
import json

import pytest

from odradek.coordination import EmbeddedBackend
from odradek.security import acl_store
from odradek.security import acl_znodes as az
from odradek.security.acl import AccessControlEntry, Operation, PatternType, Permission, ResourcePattern, ResourceType

READ_ALICE = AccessControlEntry("User:alice", "*", Operation.READ, Permission.ALLOW)


def test_paths_are_kafkas() -> None:
    assert az.resource_path(ResourcePattern(ResourceType.TOPIC, "t1")) == "/kafka-acl/Topic/t1"
    assert az.resource_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED)) == \
        "/kafka-acl-extended/prefixed/TransactionalId/tx"
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")
    assert az.resource_path(cluster) == "/kafka-acl/Cluster/kafka-cluster"
    assert "/kafka-acl-extended/prefixed/Group" in az.layout_paths()
    assert {"/kafka-acl-changes", "/kafka-acl-extended-changes"} <= set(az.layout_paths())


def test_acl_json_round_trips_and_reads_kafkas_own() -> None:
    data = az.encode_acls(frozenset({READ_ALICE}))
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    # as a Kafka broker writes it (AuthorizerTest / ZkData's example), key order and spaces of its own
    kafka = (b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Deny","operation": "ClusterAction",'
             b'"principal": "User:alice"}]}')
    assert az.decode_acls(kafka) == {AccessControlEntry("User:alice", "host1", Operation.CLUSTER_ACTION,
                                                        Permission.DENY)}
    assert az.decode_acls(data) == {READ_ALICE}
    for bad in (b"{", b'{"version":2,"acls":[]}', b'{"version":1,"acls":[{"principal":"alice"}]}'):
        with pytest.raises(az.AclZnodeError):
            az.decode_acls(bad)


def test_change_notifications_are_kafkas() -> None:
    literal = ResourcePattern(ResourceType.TOPIC, "z_other")
    prefixed = ResourcePattern(ResourceType.TOPIC, "z_other", PatternType.PREFIXED)
    assert az.encode_change(literal) == b"TOPIC:z_other"
    assert json.loads(az.encode_change(prefixed)) == {"version": 1, "resourceType": "TOPIC", "name": "z_other",
                                                      "patternType": "PREFIXED"}
    assert az.decode_change(PatternType.LITERAL, b"Topic:a:b") == ResourcePattern(ResourceType.TOPIC, "a:b")
    assert az.decode_change(PatternType.PREFIXED, az.encode_change(prefixed)) == prefixed


async def test_writes_with_compare_and_set_and_announce() -> None:
    backend = EmbeddedBackend()
    session = await backend.session()
    await acl_store.ensure_layout(session)
    pattern = ResourcePattern(ResourceType.GROUP, "g", PatternType.PREFIXED)
    write = AccessControlEntry("User:bob", "10.0.0.1", Operation.READ, Permission.DENY)
    await asyncio.gather(
        acl_store.update_resource(session, pattern, lambda cur: cur | {READ_ALICE}),
        acl_store.update_resource(session, pattern, lambda cur: cur | {write}),
    )
    assert (await acl_store.read_resource(session, pattern))[0] == {READ_ALICE, write}
    assert await acl_store.load_all(session) == {pattern: frozenset({READ_ALICE, write})}
    changes = sorted(await session.children("/kafka-acl-extended-changes"))
    assert changes == ["acl_changes_0000000000", "acl_changes_0000000001"]
    # nothing to change: nothing written, nothing announced
    await acl_store.update_resource(session, pattern, lambda cur: cur)
    assert len(await session.children("/kafka-acl-extended-changes")) == 2
    await acl_store.update_resource(session, pattern, lambda cur: frozenset())
    assert await session.exists(az.resource_path(pattern)) is None
    await backend.close()


async def test_the_watch_follows_notifications_and_purges_old_ones() -> None:
    from odradek.broker.faults import FaultState
    from odradek.broker.link.acl_watch import CHANGE_EXPIRATION_MS, AclWatch
    from odradek.broker.link.membership import Membership, Registration
    from odradek.clock import ManualClock
    from odradek.security.authorizer import Authorizer

    clock = ManualClock()
    backend = EmbeddedBackend(clock)
    writer = await backend.session()
    await acl_store.ensure_layout(writer)
    topic = ResourcePattern(ResourceType.TOPIC, "t")
    # an ACL written before the broker starts: loaded whole, its notification not replayed
    await acl_store.update_resource(writer, topic, lambda cur: cur | {READ_ALICE})
    membership = Membership(backend, 1, 10_000, clock, FaultState())
    authorizer = Authorizer(sessions=membership.current)
    watch = AclWatch(membership, authorizer)
    await membership.connect()
    await membership.register(Registration(1, "127.0.0.1", 9092, None, -1))
    assert authorizer.authorize("User:alice", "h", Operation.READ, ResourceType.TOPIC, "t")

    # another broker's change arrives through the prefixed notifications
    prefixed = ResourcePattern(ResourceType.TOPIC, "p-", PatternType.PREFIXED)
    clock.advance(CHANGE_EXPIRATION_MS + 1)
    await acl_store.update_resource(writer, prefixed, lambda cur: cur | {READ_ALICE})
    for _ in range(200):
        if authorizer.authorize("User:alice", "h", Operation.READ, ResourceType.TOPIC, "p-x"):
            break
        await asyncio.sleep(0.01)
    assert authorizer.authorize("User:alice", "h", Operation.READ, ResourceType.TOPIC, "p-x")
    # the literal notification written before the clock moved is older than 15 minutes: gone once seen
    await acl_store.update_resource(writer, topic, lambda cur: frozenset())
    for _ in range(200):
        if not authorizer.authorize("User:alice", "h", Operation.READ, ResourceType.TOPIC, "t"):
            break
        await asyncio.sleep(0.01)
    assert not authorizer.authorize("User:alice", "h", Operation.READ, ResourceType.TOPIC, "t")
    assert await writer.children("/kafka-acl-changes") == ["acl_changes_0000000001"]
    watch.stopped = True
    await membership.close()
    await backend.close()

