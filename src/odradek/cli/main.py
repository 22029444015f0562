"""The ``odradek`` command: run brokers, administer topics, and Kafka's placement tools.

Subcommands read like Kafka's shell tools (``odradek topics --create --topic t --partitions 3`` as
``kafka-topics.sh``), so operators can carry their habits over. Each lives in a module of this package, mounted here.
"""

from __future__ import annotations

import click

from odradek.cli.security import SecuredGroup


def _version() -> str:
    """The installed distribution's version (a built wheel's), else the source tree's."""
    from importlib.metadata import PackageNotFoundError, version

    from odradek import __version__

    try:
        return version("odradek")
    except PackageNotFoundError:
        return __version__


@click.group(cls=SecuredGroup)
@click.version_option(version=_version(), message="%(version)s", prog_name="odradek")
def main() -> None:
    """odradek: a Kafka-compatible commit-log cluster."""


def _mount_subcommands() -> None:
    """One import and one line per subcommand module, so branches adding commands merge without conflicts."""
    from odradek.cli.acls import acls
    from odradek.cli.assign import assign
    from odradek.cli.brokers import broker, up
    from odradek.cli.cluster import elect, reassign
    from odradek.cli.configs import configs
    from odradek.cli.console import consume, produce
    from odradek.cli.demo import demo
    from odradek.cli.dump_log import dump_log_command
    from odradek.cli.groups import groups
    from odradek.cli.perf import perf
    from odradek.cli.schema_registry import schema_registry
    from odradek.cli.schemas import schemas
    from odradek.cli.topics import topics
    from odradek.cli.transactions import transactions

    main.add_command(up)
    main.add_command(broker)
    main.add_command(topics)
    main.add_command(demo)
    main.add_command(acls)
    main.add_command(assign)
    main.add_command(reassign)
    main.add_command(elect)
    main.add_command(groups)
    main.add_command(configs)
    main.add_command(produce)
    main.add_command(consume)
    main.add_command(dump_log_command)
    main.add_command(perf)
    main.add_command(schema_registry)
    main.add_command(schemas)
    main.add_command(transactions)


_mount_subcommands()
