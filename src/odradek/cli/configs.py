"""``odradek configs``: kafka-configs.sh for topics, brokers, users and clients (describe; alter with add and delete).

Topic and broker changes go through IncrementalAlterConfigs, so ``--add-config`` touches only the names given and
``--delete-config`` returns a name to its default; the rest of the topic's overrides stay. Broker configs are static
in odradek (read from the command line at start), so altering one is refused by the broker with INVALID_REQUEST,
which is printed.

Client quotas (``--entity-type users`` and/or ``clients``, each followed by ``--entity-name NAME`` or
``--entity-default``, paired in the order given as kafka-configs.sh pairs them) go through DescribeClientQuotas and
AlterClientQuotas (KIP-546), with kafka-configs.sh's checks and messages. A lone ``users`` entity also carries SCRAM
credentials (:mod:`odradek.cli.scram`): an ``--add-config`` of ``SCRAM-SHA-*`` keys goes there, never together with
quota keys (kafka-configs.sh refuses that too), and ``--describe`` of users lists both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from odradek.cli.output import wait_result
from odradek.cli.scram import SCRAM_MECHANISMS, alter_users, describe_users
from odradek.cli.security import admin as secured_admin
from odradek.cli.security import command_config_option, connect

ENTITY_TYPES = ("topics", "brokers", "users", "clients")
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id"}
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")


class _EntityOrder(click.Command):
    """Remembers the order of ``--entity-name`` and ``--entity-default`` on the command line: kafka-configs.sh
    pairs them with the ``--entity-type`` options by position, and click keeps each option's values apart."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["entity_order"] = [
            "default" if a == "--entity-default" else "name"
            for a in args
            if a == "--entity-default" or a == "--entity-name" or a.startswith("--entity-name=")
        ]
        return super().parse_args(ctx, args)


def parse_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[a,b],k3=v3``: Kafka's syntax, square brackets around a value that itself holds commas."""
    out: dict[str, str] = {}
    i = 0
    while i < len(text):
        eq = text.find("=", i)
        if eq < 0:
            raise click.BadParameter(f"expected name=value in --add-config, got {text[i:]!r}")
        name = text[i:eq].strip()
        if text.startswith("[", eq + 1):
            close = text.find("]", eq + 2)
            if close < 0:
                raise click.BadParameter(f"unclosed [ in --add-config value of {name}")
            value, i = text[eq + 2 : close], close + 1
            if text.startswith(",", i):
                i += 1
        else:
            comma = text.find(",", eq + 1)
            end = len(text) if comma < 0 else comma
            value, i = text[eq + 1 : end], end + 1
        if not name:
            raise click.BadParameter("empty config name in --add-config")
        out[name] = value.strip()
    return out


def _source(entry: Any) -> str:
    """The config source's Kafka name (synonyms carry it as a bare number, entries as an enum)."""
    from confluent_kafka.admin import ConfigSource

    source = getattr(entry, "source", None)
    if isinstance(source, int):
        try:
            source = ConfigSource(source)
        except ValueError:
            return str(source)
    return str(getattr(source, "name", source))


def format_entry(entry: Any) -> str:
    """One config as kafka-configs.sh prints it: value, sensitivity and the synonym chain behind the value."""
    value = None if entry.is_sensitive else entry.value
    synonyms = ", ".join(f"{_source(s)}:{s.name}={s.value}" for s in (entry.synonyms or {}).values())
    sensitive = str(bool(entry.is_sensitive)).lower()
    return f"  {entry.name}={value if value is not None else 'null'} sensitive={sensitive} synonyms={{{synonyms}}}"


def _resource(entity_type: str, name: str, **kwargs: Any) -> Any:
    from confluent_kafka.admin import ConfigResource, ResourceType

    kind = ResourceType.TOPIC if entity_type == "topics" else ResourceType.BROKER
    return ConfigResource(kind, name, **kwargs)


@click.command(cls=_EntityOrder)
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--describe", "action", flag_value="describe")
@click.option("--alter", "action", flag_value="alter")
@click.option("--entity-type", "entity_types", type=click.Choice(ENTITY_TYPES), multiple=True,
              help="topics, brokers, users, clients; users and clients together for a (user, client-id) quota")
@click.option("--entity-name", "entity_names", multiple=True, help="one per --entity-type, in the same order")
@click.option("--entity-default", "entity_default", is_flag=True, multiple=True,
              help="the default user or client-id, in place of an --entity-name")
@click.option("--topic", default=None, help="same as --entity-type topics --entity-name TOPIC")
@click.option("--broker", default=None, help="same as --entity-type brokers --entity-name ID")
@click.option("--add-config", "add_config", default=None, help="k1=v1,k2=[v1,v2,v2],k3=v3")
@click.option("--delete-config", "delete_config", multiple=True, help="k1,k2 (repeatable)")
@click.option("--all", "show_all", is_flag=True, help="with --describe: every config, not only the dynamic ones")
@command_config_option()
def configs(
    bootstrap: str, action: str | None, entity_types: tuple[str, ...], entity_names: tuple[str, ...],
    entity_default: tuple[bool, ...], topic: str | None, broker: str | None, add_config: str | None,
    delete_config: tuple[str, ...], show_all: bool, command_config: dict[str, str],
) -> None:
    """Describe and alter topic, broker, user (quotas, SCRAM credentials) and client-quota configs, as
    kafka-configs.sh does."""
    if action is None:
        raise click.UsageError("Command must include exactly one action: --describe, --alter")
    names_in_order = _paired_names(click.get_current_context().meta.get("entity_order", []), entity_names)
    if topic is not None or broker is not None:
        if entity_types or names_in_order or (topic is not None and broker is not None):
            raise click.UsageError("--entity-{type,name,default} should not be used in conjunction with specific "
                                   "entity flags")
        entity_types, names_in_order = ("topics",) if topic is not None else ("brokers",), [topic or broker or ""]
    if not entity_types:
        raise click.UsageError("At least one entity type must be specified")
    duplicates = sorted({t for t in entity_types if entity_types.count(t) > 1})
    if duplicates:
        raise click.UsageError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    if len(entity_types) > 1 and set(entity_types) != set(QUOTA_ENTITY_TYPES):
        raise click.UsageError("Only 'users' and 'clients' entity types may be specified together")
    client_properties = command_config

    def make_admin() -> Any:
        return secured_admin(bootstrap, client_properties)

    if entity_types[0] in QUOTA_ENTITY_TYPES:
        _client_configs(bootstrap, make_admin, client_properties, action, list(entity_types), names_in_order,
                        add_config, delete_config)
        return
    if "" in names_in_order:
        raise click.UsageError(f"--entity-default must not be specified with --{action} of {entity_types[0]}")
    entity_type = entity_types[0]
    entity_name = names_in_order[0] if names_in_order else None
    admin = make_admin()
    singular = entity_type[:-1]
    if action == "describe":
        names = [entity_name] if entity_name else _all_names(admin, entity_type)
        for name in names:
            resource = _resource(entity_type, name)
            entries = wait_result(admin.describe_configs([resource])[resource])
            dynamic = "DYNAMIC_TOPIC_CONFIG" if entity_type == "topics" else "DYNAMIC_BROKER_CONFIG"
            shown = [e for e in entries.values() if show_all or _source(e) == dynamic]
            click.echo(f"{'All' if show_all else 'Dynamic'} configs for {singular} {name} are:")
            for entry in sorted(shown, key=lambda e: e.name):
                click.echo(format_entry(entry))
        return
    if not entity_name:
        raise click.UsageError("--alter needs --entity-name (or --topic/--broker)")
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    added = parse_add_config(add_config) if add_config else {}
    deleted = [n.strip() for item in delete_config for n in item.split(",") if n.strip()]
    if not added and not deleted:
        raise click.UsageError("--alter needs --add-config or --delete-config")
    clash = sorted(set(added) & set(deleted))
    if clash:
        raise click.UsageError(f"Invalid config(s): {','.join(clash)} given both to add and to delete")
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in added.items()]
    ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deleted]
    resource = _resource(entity_type, entity_name, incremental_configs=ops)
    wait_result(admin.incremental_alter_configs([resource])[resource])
    click.echo(f"Completed updating config for {singular} {entity_name}.")


def _all_names(admin: Any, entity_type: str) -> list[str]:
    metadata = admin.list_topics(timeout=30)
    if entity_type == "topics":
        return sorted(t for t in metadata.topics if not t.startswith("__"))
    return [str(b) for b in sorted(metadata.brokers)]


def _paired_names(order: list[str], names: tuple[str, ...]) -> list[str]:
    """The entity names in command-line order, ``""`` for each ``--entity-default`` (kafka-configs.sh's
    entityNames)."""
    given = iter(names)
    return [next(given, "") if kind == "name" else "" for kind in order]


def _quota_entity(types: list[str], names: list[str]) -> list[tuple[str, str | None]]:
    """(entity type, name or None for the default) pairs, the user first."""
    pairs = [(QUOTA_ENTITY_TYPES[t], n or None) for t, n in zip(types, names, strict=False)]
    return sorted(pairs, key=lambda p: p[0] != "user")


def _entity_text(entity: list[tuple[str, str | None]]) -> str:
    labels = {"user": "user-principal", "client-id": "client-id"}
    return ", ".join(f"{labels[t]} '{n}'" if n is not None else f"the default {labels[t]}" for t, n in entity)


def _client_configs(bootstrap: str, admin: Callable[[], Any], client_properties: dict[str, str], action: str,
                    types: list[str], names: list[str], add_config: str | None, delete_config: tuple[str, ...],
                    ) -> None:
    """users and clients: quotas, and for a lone users entity SCRAM credentials, as ConfigCommand splits them."""
    lone_user = types == ["users"]
    user = names[0] if lone_user and names else None
    if action == "describe":
        _quota_configs(bootstrap, client_properties, action, types, names, add_config, delete_config)
        if lone_user and user != "":
            describe_users(admin(), user)
        return
    added = parse_add_config(add_config) if add_config else {}
    deleted = [n.strip() for item in delete_config for n in item.split(",") if n.strip()]
    scram = [k for k in [*added, *deleted] if k in SCRAM_MECHANISMS]
    if not scram:
        _quota_configs(bootstrap, client_properties, action, types, names, add_config, delete_config)
        return
    if not lone_user:
        raise click.UsageError(f"Only quota configs can be {'added' if set(scram) & set(added) else 'deleted'} for "
                               f"'clients' using --bootstrap-server. Unexpected config names: {','.join(scram)}")
    unknown = [k for k in [*added, *deleted] if k not in SCRAM_MECHANISMS and k not in QUOTA_KEYS]
    if unknown:
        raise click.UsageError("Only quota and SCRAM credential configs can be added for 'users' using "
                               f"--bootstrap-server. Unexpected config names: {','.join(unknown)}")
    if not user:
        raise click.UsageError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                               "Credentials using --bootstrap-server.")
    if len(scram) != len(added) + len(deleted):
        raise click.UsageError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                               "using --bootstrap-server.")
    alter_users(admin(), user, added, deleted)


def _quota_configs(bootstrap: str, client_properties: dict[str, str], action: str, types: list[str],
                   names: list[str], add_config: str | None, delete_config: tuple[str, ...]) -> None:
    from odradek.admin import alter_client_quotas, describe_client_quotas
    from odradek.errors import ErrorCode, KafkaError

    if len(names) > len(types):
        raise click.UsageError("More entity names specified than entity types")
    # DescribeClientQuotas filter components: a name is an exact match, a default the default, none any name.
    components = [
        (QUOTA_ENTITY_TYPES[t], 2, None) if i >= len(names) else
        (QUOTA_ENTITY_TYPES[t], 1, None) if names[i] == "" else (QUOTA_ENTITY_TYPES[t], 0, names[i])
        for i, t in enumerate(types)
    ]
    with connect(bootstrap, client_properties, client_id="odradek-configs") as conn:
        try:
            found = describe_client_quotas(conn, components, strict=True)
        except KafkaError as exc:
            raise click.ClickException(f"{exc.code.name.upper()}: {exc.message}") from None
        if action == "describe":
            for entity, values in sorted(found, key=lambda f: [(t, n or "") for t, n in f[0]]):
                shown = ", ".join(f"{k}={v!r}" for k, v in values.items())
                click.echo(f"Quota configs for {_entity_text(entity)} are {shown}")
            return
        if len(names) != len(types):
            raise click.UsageError("--entity-name or --entity-default must be specified with each --entity-type for "
                                   "--alter")
        added = parse_add_config(add_config) if add_config else {}
        deleted = [n.strip() for item in delete_config for n in item.split(",") if n.strip()]
        if not added and not deleted:
            raise click.UsageError("--alter needs --add-config or --delete-config")
        allowed = "quota configs" if "clients" in types else "quota and SCRAM credential configs"
        kind = "clients" if "clients" in types else "users"
        for verb, keys in (("added", added), ("deleted", deleted)):
            unknown = [k for k in keys if k not in QUOTA_KEYS]
            if unknown:
                raise click.UsageError(f"Only {allowed} can be {verb} for '{kind}' using --bootstrap-server. "
                                       f"Unexpected config names: {','.join(unknown)}")
        current = found[0][1] if found else {}
        missing = [k for k in deleted if k not in current]
        if missing:
            raise click.ClickException(f"Invalid config(s): {','.join(missing)}")
        changes: dict[str, float | None] = {}
        for key, text in added.items():
            try:
                changes[key] = float(text)
            except ValueError:
                raise click.UsageError(f"Cannot parse quota configuration value for {key}: {text}") from None
        changes.update({k: None for k in deleted})
        code, message = alter_client_quotas(conn, _quota_entity(types, names), changes)
        if code != ErrorCode.none:
            raise click.ClickException(f"{code.name.upper()}: {message}")
    if names[0]:
        click.echo(f"Completed updating config for {types[0][:-1]} {names[0]}.")
    else:
        click.echo(f"Completed updating default config for {types[0]} in the cluster.")


