"""Kafka's authorization decision, on the vectors of Kafka's AuthorizerTest/BaseAuthorizerTest (the ZooKeeper-era
AclAuthorizer and KRaft's StandardAuthorizer pass the same ones)."""

from __future__ import annotations

import pytest

from odradek.security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclIndex,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
    authorize,
    authorize_any_of_type,
)

ALLOW, DENY = Permission.ALLOW, Permission.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = Operation
ALICE, ROB, BATMAN = "User:alice", "User:rob", "User:batman"
HOST1, HOST2 = "192.168.1.1", "192.168.1.2"
VALID_OPS = [op for op in Operation if op not in (Op.UNKNOWN, Op.ANY, Op.ALL)]


def ace(principal: str, host: str, op: Operation, perm: Permission) -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def index_of(*acls: tuple[ResourcePattern, AccessControlEntry]) -> AclIndex:
    index = AclIndex()
    for pattern, entry in acls:
        index = index.with_acls(pattern, index.by_pattern.get(pattern, frozenset()) | {entry})
    return index


FOO = ResourcePattern(TOPIC, "foo")


def test_topic_acl() -> None:
    # AuthorizerTest.testTopicAcl
    idx = index_of(*((FOO, e) for e in (
        ace(ALICE, HOST1, Op.READ, ALLOW), ace(ALICE, HOST2, Op.READ, ALLOW), ace(ALICE, HOST1, Op.READ, DENY),
        ace(ALICE, HOST1, Op.WRITE, ALLOW), ace(ALICE, WILDCARD, Op.DESCRIBE, ALLOW),
        ace(ROB, WILDCARD, Op.READ, ALLOW), ace(BATMAN, WILDCARD, Op.WRITE, ALLOW))))

    def can(principal: str, host: str, op: Operation) -> bool:
        return authorize(idx, principal, host, op, TOPIC, "foo")

    assert can(ALICE, HOST2, Op.READ)
    assert not can(ALICE, HOST1, Op.READ)  # the deny on host1 wins
    assert can(ALICE, HOST1, Op.WRITE)
    assert not can(ALICE, HOST2, Op.WRITE)
    assert can(ALICE, HOST1, Op.DESCRIBE) and can(ALICE, HOST2, Op.DESCRIBE)
    assert not can(ALICE, HOST1, Op.ALTER) and not can(ALICE, HOST2, Op.ALTER)
    assert can(ROB, HOST1, Op.DESCRIBE) and can(BATMAN, HOST1, Op.DESCRIBE)  # READ / WRITE imply DESCRIBE
    assert can(ROB, HOST1, Op.READ) and can(BATMAN, HOST1, Op.WRITE)


def test_deny_takes_precedence_over_allow_all() -> None:
    idx = index_of((FOO, ace(WILDCARD_PRINCIPAL, WILDCARD, Op.ALL, ALLOW)),
                   (FOO, ace(ALICE, "192.168.2.1", Op.ALL, DENY)))
    assert not authorize(idx, ALICE, "192.168.2.1", Op.READ, TOPIC, "foo")
    assert authorize(idx, ALICE, "192.168.2.2", Op.READ, TOPIC, "foo")
    assert authorize(idx, "User:random", "192.0.4.4", Op.READ, TOPIC, "foo")


def test_super_users_bypass_a_deny_all() -> None:
    idx = index_of((FOO, ace(WILDCARD_PRINCIPAL, WILDCARD, Op.ALL, DENY)))
    supers = frozenset({"User:superuser1", "User:superuser2"})
    assert authorize(idx, "User:superuser1", "192.0.4.4", Op.READ, TOPIC, "foo", super_users=supers)
    assert not authorize(idx, ALICE, "192.0.4.4", Op.READ, TOPIC, "foo", super_users=supers)


def test_wildcard_resource_acls() -> None:
    # AuthorizerTest.testWildCardAcls
    star = ResourcePattern(TOPIC, WILDCARD)
    assert not authorize(AclIndex(), ALICE, HOST1, Op.READ, TOPIC, "foo")  # fail closed
    idx = index_of((star, ace(ALICE, HOST1, Op.READ, ALLOW)))
    assert authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "foo")
    idx = index_of((star, ace(ALICE, HOST1, Op.READ, ALLOW)), (FOO, ace(ALICE, HOST1, Op.WRITE, ALLOW)),
                   (star, ace(ALICE, HOST1, Op.WRITE, DENY)))
    assert not authorize(idx, ALICE, HOST1, Op.WRITE, TOPIC, "foo")


def test_no_acl_found_rule() -> None:
    assert not authorize(AclIndex(), ALICE, HOST1, Op.READ, TOPIC, "foo")
    assert authorize(AclIndex(), ALICE, HOST1, Op.READ, TOPIC, "foo", allow_if_no_acls=True)
    # An ACL for someone else on the resource means ACLs are found: allow.everyone no longer applies.
    idx = index_of((FOO, ace(ROB, WILDCARD, Op.READ, ALLOW)))
    assert not authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "foo", allow_if_no_acls=True)
    assert authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "other", allow_if_no_acls=True)
    # ... and a prefixed or wildcard ACL counts as found too
    idx = index_of((ResourcePattern(TOPIC, "fo", PREFIXED), ace(ROB, WILDCARD, Op.READ, ALLOW)))
    assert not authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "foo", allow_if_no_acls=True)


@pytest.mark.parametrize(("parent", "implied"), [
    (Op.ALL, set(VALID_OPS)),
    (Op.READ, {Op.DESCRIBE}),
    (Op.WRITE, {Op.DESCRIBE}),
    (Op.DELETE, {Op.DESCRIBE}),
    (Op.ALTER, {Op.DESCRIBE}),
    (Op.DESCRIBE, set()),
    (Op.ALTER_CONFIGS, {Op.DESCRIBE_CONFIGS}),
    (Op.DESCRIBE_CONFIGS, set()),
    (Op.CREATE, set()),
])
def test_implications_of_allow(parent: Operation, implied: set[Operation]) -> None:
    # AuthorizerTest.testAclInheritance / testImplicationsOfAllow
    cluster = ResourcePattern(CLUSTER, "kafka-cluster")
    idx = index_of((cluster, ace(ALICE, WILDCARD, parent, ALLOW)))
    for op in VALID_OPS:
        assert authorize(idx, ALICE, HOST1, op, CLUSTER, "kafka-cluster") == (op in implied or op == parent), op


@pytest.mark.parametrize(("parent", "denied"), [
    (Op.ALL, set(VALID_OPS)), (Op.DESCRIBE, set()), (Op.DESCRIBE_CONFIGS, set()), (Op.READ, set()),
])
def test_implications_of_deny(parent: Operation, denied: set[Operation]) -> None:
    # DENY implies nothing: DENY READ leaves DESCRIBE allowed by an ALLOW ALL
    cluster = ResourcePattern(CLUSTER, "kafka-cluster")
    idx = index_of((cluster, ace(ALICE, WILDCARD, parent, DENY)), (cluster, ace(ALICE, WILDCARD, Op.ALL, ALLOW)))
    for op in VALID_OPS:
        assert authorize(idx, ALICE, HOST1, op, CLUSTER, "kafka-cluster") == (op not in denied and op != parent), op


def test_prefixed_resources() -> None:
    # AuthorizerTest.testAuthorizeWithPrefixedResource: unrelated denies around the prefix do not matter
    deny_read, allow_read = ace(ALICE, WILDCARD, Op.READ, DENY), ace(ALICE, WILDCARD, Op.READ, ALLOW)
    idx = index_of(
        (ResourcePattern(TOPIC, "a_other"), deny_read), (ResourcePattern(TOPIC, "a_other", PREFIXED), deny_read),
        (ResourcePattern(TOPIC, "foo-1234", PREFIXED), deny_read),
        (ResourcePattern(TOPIC, "fooo-9", PREFIXED), deny_read),
        (ResourcePattern(TOPIC, "fo-5", PREFIXED), deny_read), (ResourcePattern(TOPIC, "fon-", PREFIXED), deny_read),
        (ResourcePattern(TOPIC, "z_other", PREFIXED), deny_read), (ResourcePattern(TOPIC, "z_other"), deny_read),
        (ResourcePattern(TOPIC, "foo-", PREFIXED), allow_read),
    )
    assert authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "foo-abc")
    assert not authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "foo-1234-x")  # a longer prefixed deny applies
    assert not authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "fo")


def test_single_character_resources() -> None:
    # AuthorizerTest.testSingleCharacterResourceAcls
    allow_read = ace(ALICE, WILDCARD, Op.READ, ALLOW)
    idx = index_of((ResourcePattern(TOPIC, "f"), allow_read))
    assert authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "f")
    assert not authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "foo")
    idx = idx.with_acls(ResourcePattern(TOPIC, "_", PREFIXED), {allow_read})
    assert authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "_foo")
    assert authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "_")
    assert not authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "foo_")


def test_resource_types_are_separate() -> None:
    idx = index_of((ResourcePattern(GROUP, "foo"), ace(ALICE, WILDCARD, Op.READ, ALLOW)))
    assert authorize(idx, ALICE, HOST1, Op.READ, GROUP, "foo")
    assert not authorize(idx, ALICE, HOST1, Op.READ, TOPIC, "foo")


def test_acls_filter() -> None:
    # AuthorizerTest.testAclsFilter (the filter part)
    r1, r2 = ResourcePattern(TOPIC, "foo-1"), ResourcePattern(TOPIC, "bar-1")
    prefixed = ResourcePattern(TOPIC, "bar-", PREFIXED)
    acl1 = AclBinding(r1, ace(ALICE, WILDCARD, Op.READ, ALLOW))
    acl2 = AclBinding(r1, ace(ALICE, "192.168.0.1", Op.WRITE, ALLOW))
    acl3 = AclBinding(r2, ace(ALICE, WILDCARD, Op.DESCRIBE, ALLOW))
    acl4 = AclBinding(prefixed, ace(WILDCARD_PRINCIPAL, WILDCARD, Op.READ, ALLOW))
    everything = [acl1, acl2, acl3, acl4]

    def matching(flt: AclBindingFilter) -> set[AclBinding]:
        return {b for b in everything if flt.matches(b)}

    assert matching(AclBindingFilter()) == set(everything)
    assert matching(AclBindingFilter(TOPIC, "foo-1", LITERAL)) == {acl1, acl2}
    assert matching(AclBindingFilter(TOPIC, "bar-", PREFIXED)) == {acl4}
    assert matching(AclBindingFilter(ResourceType.ANY, "bar-1", PatternType.MATCH)) == {acl3, acl4}
    assert matching(AclBindingFilter(TOPIC, "baz", PatternType.ANY)) == set()
    assert matching(AclBindingFilter(principal=WILDCARD_PRINCIPAL)) == {acl4}  # testGetAclsPrincipal
    assert matching(AclBindingFilter(principal=ALICE, operation=Op.WRITE)) == {acl2}
    star = AclBinding(ResourcePattern(TOPIC, WILDCARD), ace(ALICE, WILDCARD, Op.READ, ALLOW))
    assert AclBindingFilter(TOPIC, "anything", PatternType.MATCH).matches(star)
    assert not AclBindingFilter(TOPIC, "anything", LITERAL).matches(star)


def test_authorize_by_resource_type() -> None:
    # BaseAuthorizerTest.testAuthorizeByResourceType*
    u1, u2 = "User:user1", "User:user2"
    r1 = ResourcePattern(TOPIC, "sb1")
    assert not authorize_any_of_type(AclIndex(), u1, HOST1, Op.READ, TOPIC)
    idx = index_of((r1, ace(u1, HOST1, Op.READ, ALLOW)))
    assert authorize_any_of_type(idx, u1, HOST1, Op.READ, TOPIC)
    idx = idx.with_acls(r1, idx.by_pattern[r1] | {ace(u1, HOST1, Op.READ, DENY)})
    assert not authorize_any_of_type(idx, u1, HOST1, Op.READ, TOPIC)

    # unrelated denies do not dominate an allow
    idx = index_of(*((r1, e) for e in (ace(u1, HOST1, Op.READ, DENY), ace(u2, HOST1, Op.READ, DENY),
                                       ace(u1, HOST2, Op.WRITE, DENY), ace(u2, HOST2, Op.READ, DENY),
                                       ace(u1, HOST2, Op.READ, ALLOW))),
                   (ResourcePattern(TOPIC, "sb2"), ace(u1, HOST2, Op.READ, DENY)),
                   (ResourcePattern(GROUP, "s", PREFIXED), ace(u1, HOST2, Op.READ, DENY)))
    assert not authorize_any_of_type(idx, u1, HOST1, Op.READ, TOPIC)
    assert not authorize_any_of_type(idx, u1, HOST1, Op.READ, GROUP)
    assert authorize_any_of_type(idx, u1, HOST2, Op.READ, TOPIC)

    # prefixed denies dominate the allows on longer prefixes
    allow, deny = ace(u1, HOST1, Op.READ, ALLOW), ace(u1, HOST1, Op.READ, DENY)
    g = {n: ResourcePattern(GROUP, n, PREFIXED) for n in ("a", "ab", "abc", "abcd", "abcde")}
    idx = index_of((g["abcde"], allow))
    assert authorize_any_of_type(idx, u1, HOST1, Op.READ, GROUP)
    idx = idx.with_acls(g["abcd"], {deny})
    assert not authorize_any_of_type(idx, u1, HOST1, Op.READ, GROUP)
    idx = idx.with_acls(g["abc"], {allow})
    assert authorize_any_of_type(idx, u1, HOST1, Op.READ, GROUP)
    idx = idx.with_acls(g["a"], {deny})
    assert not authorize_any_of_type(idx, u1, HOST1, Op.READ, GROUP)

    # a wildcard literal deny refuses everything; allow.everyone then no longer helps
    idx = index_of((ResourcePattern(TOPIC, WILDCARD), ace(u1, WILDCARD, Op.WRITE, DENY)))
    assert not authorize_any_of_type(idx, u1, HOST1, Op.WRITE, TOPIC, allow_if_no_acls=True)
    assert authorize_any_of_type(AclIndex(), u1, HOST1, Op.WRITE, TOPIC, allow_if_no_acls=True)
    assert authorize_any_of_type(idx, "User:admin", HOST1, Op.WRITE, TOPIC, super_users=frozenset({"User:admin"}))


def test_codes_and_names_are_kafkas() -> None:
    assert (int(Op.READ), int(Op.IDEMPOTENT_WRITE), int(ALLOW), int(DENY)) == (3, 12, 3, 2)
    assert (int(TOPIC), int(ResourceType.TRANSACTIONAL_ID), int(LITERAL), int(PREFIXED)) == (2, 5, 3, 4)
    assert Op.CLUSTER_ACTION.pascal == "ClusterAction" and ResourceType.TRANSACTIONAL_ID.pascal == "TransactionalId"
    assert Op.parse("ClusterAction") is Op.CLUSTER_ACTION and Op.parse("describe-configs") is Op.DESCRIBE_CONFIGS


def test_authorizer_settings() -> None:
    from odradek.broker.config import BrokerConfig
    from odradek.security.authorizer import from_config

    assert from_config(BrokerConfig.build().values) is None  # Kafka's default: no authorizer
    built = from_config(BrokerConfig.build(overrides={
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": " User:admin ; User:broker ;", "allow.everyone.if.no.acl.found": "true"}).values)
    assert built is not None and built.super_users == {"User:admin", "User:broker"} and built.allow_if_no_acls
    with pytest.raises(ValueError, match="unknown authorizer"):
        BrokerConfig.build(overrides={"authorizer.class.name": "com.example.MyAuthorizer"})
    with pytest.raises(ValueError, match="principalType:name"):
        BrokerConfig.build(overrides={"super.users": "admin"})
