"""``odradek configs``: kafka-configs.sh for topics, brokers and users (describe; alter with add and delete).

Changes go through IncrementalAlterConfigs, so ``--add-config`` touches only the names given and ``--delete-config``
returns a name to its default; the rest of the topic's overrides stay. Broker configs are static in odradek (read
from the command line at start), so altering one is refused by the broker with INVALID_REQUEST, which is printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from odradek.cli_output import admin_client, kafka_config, wait_result
from odradek.cli_scram import alter_users, describe_users, read_command_config

ENTITY_TYPES = ("topics", "brokers", "users")


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


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--describe", "action", flag_value="describe")
@click.option("--alter", "action", flag_value="alter")
@click.option("--entity-type", type=click.Choice(ENTITY_TYPES), default=None)
@click.option("--entity-name", default=None)
@click.option("--topic", default=None, help="same as --entity-type topics --entity-name TOPIC")
@click.option("--broker", default=None, help="same as --entity-type brokers --entity-name ID")
@click.option("--add-config", "add_config", default=None, help="k1=v1,k2=[v1,v2,v2],k3=v3")
@click.option("--delete-config", "delete_config", multiple=True, help="k1,k2 (repeatable)")
@click.option("--all", "show_all", is_flag=True, help="with --describe: every config, not only the dynamic ones")
@click.option("--command-config", "command_config", default=None, type=click.Path(path_type=Path, exists=True),
              help="client properties (security.protocol, sasl.mechanism, sasl.username, ...)")
def configs(
    bootstrap: str, action: str | None, entity_type: str | None, entity_name: str | None, topic: str | None,
    broker: str | None, add_config: str | None, delete_config: tuple[str, ...], show_all: bool,
    command_config: Path | None,
) -> None:
    """Describe and alter topic, broker and user (SCRAM credential) configs, as kafka-configs.sh does."""
    if action is None:
        raise click.UsageError("Command must include exactly one action: --describe, --alter")
    if topic is not None or broker is not None:
        if entity_type is not None or (topic is not None and broker is not None):
            raise click.UsageError("give one of --entity-type/--entity-name, --topic, --broker")
        entity_type, entity_name = ("topics", topic) if topic is not None else ("brokers", broker)
    if entity_type is None:
        raise click.UsageError("--entity-type (or --topic/--broker) is required")
    client_properties = read_command_config(command_config)
    if client_properties:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({**kafka_config(bootstrap), **client_properties})
    else:
        admin = admin_client(bootstrap)
    singular = entity_type[:-1]
    if entity_type == "users":
        _users(admin, action, entity_name, add_config, delete_config)
        return
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


def _users(admin: Any, action: str, user: str | None, add_config: str | None,
           delete_config: tuple[str, ...]) -> None:
    if action == "describe":
        describe_users(admin, user)
        return
    if not user:
        raise click.UsageError("--alter needs --entity-name")
    added = parse_add_config(add_config) if add_config else {}
    deleted = [n.strip() for item in delete_config for n in item.split(",") if n.strip()]
    if not added and not deleted:
        raise click.UsageError("--alter needs --add-config or --delete-config")
    alter_users(admin, user, added, deleted)


def _all_names(admin: Any, entity_type: str) -> list[str]:
    metadata = admin.list_topics(timeout=30)
    if entity_type == "topics":
        return sorted(t for t in metadata.topics if not t.startswith("__"))
    return [str(b) for b in sorted(metadata.brokers)]
