"""``odradek topics``: create, list, describe and delete topics, as kafka-topics.sh does."""

from __future__ import annotations

import click

from odradek.cli.options import key_values
from odradek.cli.security import command_config_option, connect
from odradek.errors import ErrorCode


@click.command()
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--create", "action", flag_value="create")
@click.option("--list", "action", flag_value="list")
@click.option("--describe", "action", flag_value="describe")
@click.option("--delete", "action", flag_value="delete")
@click.option("--topic", default=None)
@click.option("--partitions", default=-1, type=int)
@click.option("--replication-factor", default=-1, type=int)
@click.option("--config", "configs", multiple=True, help="topic config as key=value")
@click.option("--under-replicated-partitions", is_flag=True, help="with --describe: only under-replicated ones")
@click.option("--unavailable-partitions", is_flag=True, help="with --describe: only partitions without a leader")
@command_config_option()
def topics(
    bootstrap: str, action: str | None, topic: str | None, partitions: int, replication_factor: int,
    configs: tuple[str, ...], under_replicated_partitions: bool, unavailable_partitions: bool,
    command_config: dict[str, str],
) -> None:
    """Create, list, describe and delete topics, as kafka-topics.sh does."""
    from odradek.admin import create_topic, delete_topic, describe_topics, list_topics
    if action is None:
        raise click.UsageError("one of --create, --list, --describe, --delete is required")
    with connect(bootstrap, command_config) as conn:
        if action == "list":
            for name in list_topics(conn):
                click.echo(name)
        elif action == "create":
            if not topic:
                raise click.UsageError("--create needs --topic")
            error, message = create_topic(conn, topic, partitions, replication_factor, key_values(configs))
            if error != ErrorCode.none:
                raise click.ClickException(f"{error.name.upper()}: {message or ''}".rstrip(": "))
            click.echo(f"Created topic {topic}.")
        elif action == "delete":
            if not topic:
                raise click.UsageError("--delete needs --topic")
            error, message = delete_topic(conn, topic)
            if error != ErrorCode.none:
                raise click.ClickException(f"{error.name.upper()}: {message or ''}".rstrip(": "))
            click.echo(f"Deleted topic {topic}.")
        else:
            for line in describe_topics(conn, topic, under_replicated_partitions, unavailable_partitions):
                click.echo(line)
