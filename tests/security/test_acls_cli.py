"""``odradek acls``: kafka-acls.sh's options and output, against a real cluster with an authorizer."""

from __future__ import annotations

from click.testing import CliRunner, Result
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kafka_clients import opened
from odradek.cli import main
from odradek.testing import ThreadedCluster


def acls(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, ["acls", *args], input=input, catch_exceptions=False)


def stored(bootstrap: str, name: str) -> set[tuple[str, str, str, str, str]]:
    """The ACLs on resources named ``name``, as an admin client reads them back (not through the tool)."""
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    flt = AclBindingFilter(ResourceType.ANY, name, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    return {(b.resource_pattern_type.name, b.principal, b.host, b.operation.name, b.permission_type.name)
            for b in admin.describe_acls(flt, request_timeout=30).result()}


def test_add_list_remove(secured: ThreadedCluster) -> None:
    bootstrap = secured.bootstrap
    added = acls("--bootstrap-server", bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                 "--operation", "Describe", "--topic", "cli-topic", "--deny-principal", "User:bob",
                 "--deny-host", "10.1.1.1")
    assert added.exit_code == 0, added.output
    pattern = "`ResourcePattern(resourceType=TOPIC, name=cli-topic, patternType=LITERAL)`"
    assert f"Adding ACLs for resource {pattern}: " in added.stdout
    assert "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in added.stdout
    assert f"Current ACLs for resource {pattern}: " in added.stdout
    assert stored(bootstrap, "cli-topic") == {
        ("LITERAL", "User:alice", "*", "READ", "ALLOW"), ("LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
        ("LITERAL", "User:bob", "10.1.1.1", "READ", "DENY"), ("LITERAL", "User:bob", "10.1.1.1", "DESCRIBE", "DENY")}

    listed = acls("--bootstrap-server", bootstrap, "--list", "--topic", "cli-topic", "--principal", "User:bob")
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines()[0] == "ACLs for principal `User:bob`"
    assert "User:alice" not in listed.stdout and "operation=DESCRIBE, permissionType=DENY" in listed.stdout

    declined = acls("--bootstrap-server", bootstrap, "--remove", "--topic", "cli-topic", input="n\n")
    assert declined.exit_code == 0 and len(stored(bootstrap, "cli-topic")) == 4
    removed = acls("--bootstrap-server", bootstrap, "--remove", "--force", "--deny-principal", "User:bob",
                   "--deny-host", "10.1.1.1", "--operation", "Read", "--topic", "cli-topic")
    assert removed.exit_code == 0, removed.output
    assert ("LITERAL", "User:bob", "10.1.1.1", "READ", "DENY") not in stored(bootstrap, "cli-topic")
    everything = acls("--bootstrap-server", bootstrap, "--remove", "--topic", "cli-topic", input="y\n")
    assert everything.exit_code == 0, everything.output
    assert stored(bootstrap, "cli-topic") == set()


def test_producer_and_consumer_shortcuts_with_prefixes(secured: ThreadedCluster) -> None:
    bootstrap = secured.bootstrap
    out = acls("--bootstrap-server", bootstrap, "--add", "--allow-principal", "User:carol", "--producer",
               "--consumer", "--topic", "cli-pfx-", "--group", "cli-pfx-", "--resource-pattern-type", "prefixed")
    assert out.exit_code == 0, out.output
    assert {op for _, p, _, op, _ in stored(bootstrap, "cli-pfx-") if p == "User:carol"} == {
        "WRITE", "DESCRIBE", "CREATE", "READ"}
    assert all(kind == "PREFIXED" for kind, *_ in stored(bootstrap, "cli-pfx-"))
    match = acls("--bootstrap-server", bootstrap, "--list", "--topic", "cli-pfx-orders", "--resource-pattern-type",
                 "match")
    assert "name=cli-pfx-, patternType=PREFIXED" in match.stdout


def test_bad_usage(secured: ThreadedCluster) -> None:
    bootstrap = secured.bootstrap
    assert acls("--bootstrap-server", bootstrap, "--topic", "t").exit_code != 0  # no action
    no_resource = acls("--bootstrap-server", bootstrap, "--add", "--allow-principal", "User:a")
    assert no_resource.exit_code != 0 and "at least one resource" in no_resource.output
    bad_principal = acls("--bootstrap-server", bootstrap, "--add", "--allow-principal", "alice", "--topic", "t")
    assert bad_principal.exit_code != 0 and "principalType:name" in bad_principal.output
    match_add = acls("--bootstrap-server", bootstrap, "--add", "--allow-principal", "User:a", "--topic", "t",
                     "--resource-pattern-type", "match")
    assert match_add.exit_code != 0 and "not valid when adding" in match_add.output
