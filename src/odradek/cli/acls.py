"""``odradek acls``: kafka-acls.sh, over CreateAcls, DescribeAcls and DeleteAcls.

The options are kafka-acls.sh's (``--add``/``--remove``/``--list``, ``--allow-principal``, ``--deny-principal``,
``--allow-host``/``--deny-host`` defaulting to ``*``, ``--operation`` defaulting to All, ``--topic``, ``--group``,
``--cluster``, ``--transactional-id``, ``--resource-pattern-type``, ``--producer``/``--consumer``/``--idempotent``,
``--force``) and so is the output ("Adding ACLs for resource `ResourcePattern(...)`", "Current ACLs for resource
..."), so scripts written against Kafka's tool read it. ``--command-config`` reads client properties
(``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, ...) from a file, as kafka-acls.sh does
(:mod:`odradek.cli.security`), and ``--command-property`` passes single librdkafka settings, for a cluster reachable
only over SASL or TLS.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from odradek.cli.output import wait_result
from odradek.cli.security import admin as secured_admin
from odradek.cli.security import command_config_option
from odradek.security.acl import CLUSTER_NAME, WILDCARD, Operation

OPERATIONS = [op.pascal for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)]
PATTERN_TYPES = ("LITERAL", "PREFIXED", "ANY", "MATCH")
PRODUCER_OPERATIONS = {"TOPIC": ["Write", "Describe", "Create"], "TRANSACTIONAL_ID": ["Write", "Describe"]}
CONSUMER_OPERATIONS = {"TOPIC": ["Read", "Describe"], "GROUP": ["Read"]}


def _filter(*args: Any) -> Any:
    """confluent-kafka's AclBindingFilter (its stubs refuse the None that means "any", which it accepts)."""
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(*args)


def _pattern_string(restype: Any, name: str | None, pattern: Any) -> str:
    kind = "CLUSTER" if restype.name == "BROKER" else restype.name
    return f"ResourcePattern(resourceType={kind}, name={name if name is not None else '<any>'}, " \
           f"patternType={pattern.name})"


def _entry_string(binding: Any) -> str:
    return (f"(principal={binding.principal}, host={binding.host}, operation={binding.operation.name}, "
            f"permissionType={binding.permission_type.name})")


def _resources(topics: Iterable[str], groups: Iterable[str], cluster: bool, transactional_ids: Iterable[str],
               pattern: str) -> list[tuple[Any, str, Any]]:
    """(resource type, name, pattern type) per resource named on the command line, as AclCommand collects them."""
    from confluent_kafka.admin import ResourcePatternType, ResourceType

    pattern_type = ResourcePatternType[pattern]
    out = [(ResourceType.TOPIC, t.strip(), pattern_type) for t in topics]
    if cluster and pattern == "LITERAL":
        out.append((ResourceType.BROKER, CLUSTER_NAME, pattern_type))
    out += [(ResourceType.GROUP, g.strip(), pattern_type) for g in groups]
    out += [(ResourceType.TRANSACTIONAL_ID, t, pattern_type) for t in transactional_ids]
    return out


def _entries(operations: Iterable[str], allow: Iterable[str], deny: Iterable[str], allow_hosts: Iterable[str],
             deny_hosts: Iterable[str]) -> list[tuple[str, str, Any, Any]]:
    """(principal, host, operation, permission) for every combination, as AclCommand.getAcls builds them."""
    from confluent_kafka.admin import AclOperation, AclPermissionType

    ops = [AclOperation[Operation(Operation.parse(o)).name] for o in operations]
    out: list[tuple[str, str, Any, Any]] = []
    for principals, hosts, permission in ((allow, allow_hosts, AclPermissionType.ALLOW),
                                          (deny, deny_hosts, AclPermissionType.DENY)):
        principals = [_principal(p) for p in principals]
        for principal in principals:
            for host in list(hosts) or [WILDCARD]:
                for op in ops:
                    out.append((principal, host.strip(), op, permission))
    return out


def _principal(text: str) -> str:
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise click.BadParameter(f"expected a principal as principalType:name (User:alice), got {text!r}")
    return text.strip()


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--add", "action", flag_value="add", help="add ACLs")
@click.option("--remove", "action", flag_value="remove", help="remove ACLs")
@click.option("--list", "action", flag_value="list", help="list ACLs (of the resources given, else all)")
@click.option("--allow-principal", multiple=True, help="principalType:name to allow (repeatable; User:* for all)")
@click.option("--deny-principal", multiple=True, help="principalType:name to deny (repeatable)")
@click.option("--principal", "list_principals", multiple=True, help="with --list: only this principal's ACLs")
@click.option("--allow-host", multiple=True, help="host the allowed principals may come from (default *)")
@click.option("--deny-host", multiple=True, help="host the denied principals are refused from (default *)")
@click.option("--operation", "operations", multiple=True, type=click.Choice(OPERATIONS, case_sensitive=False),
              help="operation (repeatable; default All)")
@click.option("--topic", "topics", multiple=True, help="topic (repeatable; * for all topics)")
@click.option("--group", "groups", multiple=True, help="consumer group (repeatable; * for all)")
@click.option("--cluster", is_flag=True, help="the cluster resource")
@click.option("--transactional-id", "transactional_ids", multiple=True, help="transactional id (repeatable)")
@click.option("--resource-pattern-type", "pattern", default="LITERAL", show_default=True,
              type=click.Choice(PATTERN_TYPES, case_sensitive=False),
              help="LITERAL or PREFIXED to add; ANY or MATCH too to list or remove")
@click.option("--producer", is_flag=True,
              help="WRITE, DESCRIBE, CREATE on --topic; WRITE, DESCRIBE on --transactional-id")
@click.option("--consumer", is_flag=True, help="READ, DESCRIBE on --topic; READ on --group")
@click.option("--idempotent", is_flag=True, help="with --producer: IDEMPOTENT_WRITE on the cluster")
@click.option("--force", is_flag=True, help="remove without asking")
@command_config_option()
@click.option("--command-property", "properties", multiple=True, help="librdkafka setting name=value (repeatable)")
def acls(
    bootstrap: str, action: str | None, allow_principal: tuple[str, ...], deny_principal: tuple[str, ...],
    list_principals: tuple[str, ...], allow_host: tuple[str, ...], deny_host: tuple[str, ...],
    operations: tuple[str, ...], topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool,
    transactional_ids: tuple[str, ...], pattern: str, producer: bool, consumer: bool, idempotent: bool, force: bool,
    command_config: dict[str, str], properties: tuple[str, ...],
) -> None:
    """Add, remove and list ACLs, as kafka-acls.sh does."""
    if action is None:
        raise click.UsageError("Command must include exactly one action: --list, --add, --remove")
    pattern = pattern.upper()
    if action == "add" and pattern not in ("LITERAL", "PREFIXED"):
        raise click.UsageError(f"A '--resource-pattern-type' value of '{pattern}' is not valid when adding acls.")
    admin = secured_admin(bootstrap, command_config, properties)
    if action == "list":
        _list(admin, _resources(topics, groups, cluster, transactional_ids, pattern), list_principals)
        return
    plan = _plan(topics, groups, cluster, transactional_ids, pattern, producer, consumer, idempotent,
                 list(operations) or ["All"], allow_principal, deny_principal, allow_host, deny_host)
    if action == "add":
        _add(admin, plan)
    else:
        _remove(admin, plan, force)


def _plan(topics: tuple[str, ...], groups: tuple[str, ...], cluster: bool, transactional_ids: tuple[str, ...],
          pattern: str, producer: bool, consumer: bool, idempotent: bool, operations: list[str],
          allow: tuple[str, ...], deny: tuple[str, ...], allow_hosts: tuple[str, ...], deny_hosts: tuple[str, ...],
          ) -> list[tuple[tuple[Any, str, Any], list[tuple[str, str, Any, Any]]]]:
    """Per resource, the ACL entries the options ask for (AclCommand's getResourceFilterToAcls)."""
    resources = _resources(topics, groups, cluster, transactional_ids, pattern)
    if not resources:
        raise click.UsageError("You must provide at least one resource: --topic <topic> or --cluster or "
                               "--group <group> or --transactional-id <id>")

    def entries(ops: list[str]) -> list[tuple[str, str, Any, Any]]:
        return _entries(ops, allow, deny, allow_hosts, deny_hosts)

    if not (producer or consumer):
        return [(r, entries(operations)) for r in resources]
    plan: dict[tuple[Any, str, Any], list[tuple[str, str, Any, Any]]] = {}
    for r in resources:
        kind = r[0].name
        wanted: list[str] = []
        if producer:
            wanted += PRODUCER_OPERATIONS.get(kind, [])
        if consumer:
            wanted += CONSUMER_OPERATIONS.get(kind, [])
        if wanted:
            plan[r] = entries(list(dict.fromkeys(wanted)))
    if producer and idempotent:
        from confluent_kafka.admin import ResourcePatternType, ResourceType

        plan[(ResourceType.BROKER, CLUSTER_NAME, ResourcePatternType.LITERAL)] = entries(["IdempotentWrite"])
    return list(plan.items())


def _add(admin: Any, plan: list[tuple[tuple[Any, str, Any], list[tuple[str, str, Any, Any]]]]) -> None:
    from confluent_kafka.admin import AclBinding

    for (restype, name, pattern_type), entries in plan:
        bindings = [AclBinding(restype, name, pattern_type, *entry) for entry in entries]
        if not bindings:
            raise click.UsageError("--add needs --allow-principal or --deny-principal")
        lines = "\n".join(f"\t{_entry_string(b)}" for b in bindings)
        click.echo(f"Adding ACLs for resource `{_pattern_string(restype, name, pattern_type)}`: \n {lines} \n")
        for future in admin.create_acls(bindings, request_timeout=30).values():
            wait_result(future)
    _list(admin, [resource for resource, _ in plan], ())


def _remove(admin: Any, plan: list[tuple[tuple[Any, str, Any], list[tuple[str, str, Any, Any]]]],
            force: bool) -> None:
    from confluent_kafka.admin import AclOperation, AclPermissionType

    for (restype, name, pattern_type), entries in plan:
        shown = _pattern_string(restype, name, pattern_type)
        if entries:
            lines = "\n".join(f"\t{_entry_string(_filter(restype, name, pattern_type, *e))}" for e in entries)
            question = f"Are you sure you want to remove ACLs: \n {lines} \n from resource filter `{shown}`?"
            filters = [_filter(restype, name, pattern_type, *entry) for entry in entries]
        else:
            question = f"Are you sure you want to delete all ACLs for resource filter `{shown}`?"
            filters = [_filter(restype, name, pattern_type, None, None, AclOperation.ANY, AclPermissionType.ANY)]
        if not force and not click.confirm(question, default=False):
            continue
        for future in admin.delete_acls(filters, request_timeout=30).values():
            wait_result(future)
    _list(admin, [resource for resource, _ in plan], ())


def _list(admin: Any, resources: list[tuple[Any, str, Any]], principals: tuple[str, ...]) -> None:
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType as RT

    filters = [_filter(restype, name, pattern_type, None, None, AclOperation.ANY, AclPermissionType.ANY)
               for restype, name, pattern_type in resources]
    if not filters:
        filters = [_filter(RT.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)]
    by_resource: dict[tuple[Any, str, Any], list[Any]] = {}
    for flt in filters:
        for binding in wait_result(admin.describe_acls(flt, request_timeout=30)):
            key = (binding.restype, binding.name, binding.resource_pattern_type)
            if binding not in by_resource.setdefault(key, []):
                by_resource[key].append(binding)
    groups: list[tuple[str, set[str] | None]] = [
        (f"ACLs for principal `{_principal(p)}`", {p.strip()}) for p in principals] or [("", None)]
    for title, only in groups:
        if title:
            click.echo(title)
        for (restype, name, pattern_type), bindings in sorted(by_resource.items(), key=lambda kv: (
                kv[0][0].value, kv[0][2].value, kv[0][1])):
            shown = [b for b in bindings if only is None or b.principal in only]
            if not shown:
                continue
            lines = "\n".join(f"\t{_entry_string(b)}" for b in sorted(shown, key=_entry_string))
            click.echo(f"Current ACLs for resource `{_pattern_string(restype, name, pattern_type)}`: \n {lines} \n")

