"""The ``odradek`` command: run brokers, administer topics, and Kafka's placement tools.

Subcommands read like Kafka's shell tools (``odradek topics --create --topic t --partitions 3`` as
``kafka-topics.sh``), so operators can carry their habits over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import click

from odradek import event_loop
from odradek.broker.config import BrokerConfig
from odradek.cli.security import SecuredGroup, command_config_option, connect
from odradek.errors import ErrorCode


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop ODRADEK_EVENT_LOOP asks for; a value we do not know is a usage error, not a traceback."""
    try:
        return event_loop.loop_factory()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def _parse_overrides(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        if "=" not in item:
            raise click.BadParameter(f"expected key=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


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


@main.command()
@click.option("--data-dir", default=".odradek-data", show_default=True, type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=9092, show_default=True, type=int, help="0 picks a free port")
@click.option("--broker-id", default=0, show_default=True, type=int)
@click.option("--rack", default=None)
@click.option("--ready-file", default=None, type=click.Path(path_type=Path))
@click.option("--override", "overrides", multiple=True, help="broker config as key=value (Kafka names)")
@click.option("--log-level", default="INFO", show_default=True)
@click.option("--brokers", default=1, show_default=True, type=int, help="brokers in this process (a cluster when > 1)")
@click.option("--racks", default=None, help="comma-separated racks, one per broker (or one for all)")
@click.option("--metrics-port", default=None, type=int,
              help="serve /metrics and the web console here (consecutive ports per broker; 0 picks free ones)")
def up(
    data_dir: Path, host: str, port: int, broker_id: int, rack: str | None, ready_file: Path | None,
    overrides: tuple[str, ...], log_level: str, brokers: int, racks: str | None, metrics_port: int | None,
) -> None:
    """Start a cluster on the embedded store (one broker unless --brokers N); print ``bootstrap.servers=...``.

    One broker or many, every broker runs the controller and the cluster keeps its metadata journaled in
    ``DATA_DIR/coordination``; broker ``<id>`` keeps its logs in ``DATA_DIR/broker-<id>``. Brokers get consecutive
    ports from ``--port`` (any free ports with 0) and ids from ``--broker-id``. A directory written by the old
    single-broker mode (``topics.json``) is migrated on first start.
    """
    from odradek.cluster import LocalCluster
    from odradek.migration import MigrationRefused
    from odradek.runner import configure_logging, exit_after_stop, run_cluster

    configure_logging(log_level)
    loop = _loop_factory()
    settings = _parse_overrides(overrides)
    try:
        broker_id = int(settings.pop("broker.id", broker_id))  # server.properties habit: the first broker's id
    except ValueError as exc:
        raise click.UsageError(f"broker.id must be a number: {exc}") from exc
    rack_list = racks.split(",") if racks else ([rack] if rack else None)
    try:
        cluster = LocalCluster(
            brokers, data_dir, racks=rack_list, overrides=settings, host=host,
            ports=[port + i if port else 0 for i in range(brokers)], first_broker_id=broker_id,
            metrics_ports=None if metrics_port is None else [metrics_port + i if metrics_port else 0
                                                             for i in range(brokers)],
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        event_loop.run(run_cluster(cluster, ready_file), loop)
    except MigrationRefused as exc:
        raise click.ClickException(str(exc)) from exc
    exit_after_stop()


@main.command()
@click.option("--id", "broker_id", required=True, type=int)
@click.option("--zookeeper", required=True, help="HOST:PORT[,HOST:PORT...][/chroot]")
@click.option("--data-dir", default=".odradek-data", show_default=True, type=click.Path(path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=9092, show_default=True, type=int, help="0 picks a free port")
@click.option("--rack", default=None)
@click.option("--ready-file", default=None, type=click.Path(path_type=Path))
@click.option("--override", "overrides", multiple=True, help="broker config as key=value (Kafka names)")
@click.option("--log-level", default="INFO", show_default=True)
@click.option("--metrics-port", default=None, type=int, help="serve /metrics and the web console here (0: any)")
def broker(
    broker_id: int, zookeeper: str, data_dir: Path, host: str, port: int, rack: str | None,
    ready_file: Path | None, overrides: tuple[str, ...], log_level: str, metrics_port: int | None,
) -> None:
    """One broker of a cluster coordinated by a real ZooKeeper (as Kafka ran before KRaft)."""
    from odradek.migration import MigrationRefused
    from odradek.runner import configure_logging, exit_after_stop, run_zookeeper_broker

    configure_logging(log_level)
    loop = _loop_factory()
    settings = _parse_overrides(overrides)
    settings["broker.id"] = str(broker_id)
    settings["zookeeper.connect"] = zookeeper
    if rack:
        settings["broker.rack"] = rack
    try:
        config = BrokerConfig.build(host=host, port=port, data_dir=str(data_dir), overrides=settings)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        event_loop.run(run_zookeeper_broker(config, ready_file, zookeeper, metrics_port), loop)
    except MigrationRefused as exc:
        raise click.ClickException(str(exc)) from exc
    exit_after_stop()


@main.command()
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
            error, message = create_topic(conn, topic, partitions, replication_factor, _parse_overrides(configs))
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


@main.command()
@click.option("--brokers", default=3, show_default=True, type=int)
@click.option("--events", default=20000, show_default=True, type=int, help="clickstream events to produce")
@click.option("--seconds", default=60.0, show_default=True, type=float, help="how long producing and checking take")
@click.option("--data-dir", default=None, type=click.Path(path_type=Path))
def demo(brokers: int, events: int, seconds: float, data_dir: Path | None) -> None:
    """Run the example Spark pipeline against a fresh cluster, kill a broker midway, check the totals."""
    from odradek.demo import run
    from odradek.runner import configure_logging

    configure_logging("WARNING")
    if not run(brokers, events, seconds, data_dir):
        raise SystemExit(1)


def _mount_subcommands() -> None:
    """One import and one line per subcommand module, so branches adding commands merge without conflicts."""
    from odradek.cli.acls import acls
    from odradek.cli.assign import assign
    from odradek.cli.cluster import elect, reassign
    from odradek.cli.configs import configs
    from odradek.cli.console import consume, produce
    from odradek.cli.dump_log import dump_log_command
    from odradek.cli.groups import groups
    from odradek.cli.perf import perf
    from odradek.cli.transactions import transactions

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
    main.add_command(transactions)


_mount_subcommands()
