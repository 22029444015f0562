"""``odradek up`` (a cluster on the embedded store) and ``odradek broker`` (one broker of a ZooKeeper cluster)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import click

from odradek import event_loop
from odradek.broker.config import BrokerConfig
from odradek.cli.options import key_values
from odradek.cli.schema_registry import broker_port, resolve_port, schema_registry_port_option


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop ODRADEK_EVENT_LOOP asks for; a value we do not know is a usage error, not a traceback."""
    try:
        return event_loop.loop_factory()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


@click.command()
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
@schema_registry_port_option(default=None)
def up(
    data_dir: Path, host: str, port: int, broker_id: int, rack: str | None, ready_file: Path | None,
    overrides: tuple[str, ...], log_level: str, brokers: int, racks: str | None, metrics_port: int | None,
    schema_registry_port: str | None,
) -> None:
    """Start a quickstart cluster on the embedded store (one broker unless --brokers N); print its endpoints.

    The brokers take Kafka's quickstart values (its shipped ``config/server.properties``, e.g.
    ``group.initial.rebalance.delay.ms=0``) where they differ from the code defaults; ``--override`` wins.

    One broker or many, every broker runs the controller and the cluster keeps its metadata journaled in
    ``DATA_DIR/coordination``; broker ``<id>`` keeps its logs in ``DATA_DIR/broker-<id>``. Brokers get consecutive
    ports from ``--port`` (any free ports with 0) and ids from ``--broker-id``. A directory written by the old
    single-broker mode (``topics.json``) is migrated on first start.
    """
    from odradek.cluster import LocalCluster
    from odradek.migration import MigrationRefused
    from odradek.quickstart import up_settings
    from odradek.runner import RegistryStartFailed, configure_logging, exit_after_stop, run_cluster

    registry_port = resolve_port(schema_registry_port, port)
    configure_logging(log_level)
    loop = _loop_factory()
    settings = key_values(overrides)
    try:
        broker_id = int(settings.pop("broker.id", broker_id))  # server.properties habit: the first broker's id
    except ValueError as exc:
        raise click.UsageError(f"broker.id must be a number: {exc}") from exc
    settings = up_settings(brokers, settings)
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
        event_loop.run(run_cluster(cluster, ready_file, registry_port), loop)
    except (MigrationRefused, RegistryStartFailed) as exc:
        raise click.ClickException(str(exc)) from exc
    exit_after_stop()


@click.command()
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
@schema_registry_port_option(default="none")
def broker(
    broker_id: int, zookeeper: str, data_dir: Path, host: str, port: int, rack: str | None,
    ready_file: Path | None, overrides: tuple[str, ...], log_level: str, metrics_port: int | None,
    schema_registry_port: str | None,
) -> None:
    """One broker of a cluster coordinated by a real ZooKeeper (as Kafka ran before KRaft), on Kafka's code defaults."""
    from odradek.migration import MigrationRefused
    from odradek.quickstart import log_broker_settings
    from odradek.runner import RegistryStartFailed, configure_logging, exit_after_stop, run_zookeeper_broker

    registry_port = broker_port(schema_registry_port)
    configure_logging(log_level)
    loop = _loop_factory()
    settings = key_values(overrides)
    log_broker_settings(settings)
    settings["broker.id"] = str(broker_id)
    settings["zookeeper.connect"] = zookeeper
    if rack:
        settings["broker.rack"] = rack
    try:
        config = BrokerConfig.build(host=host, port=port, data_dir=str(data_dir), overrides=settings)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        event_loop.run(run_zookeeper_broker(config, ready_file, zookeeper, metrics_port, registry_port), loop)
    except (MigrationRefused, RegistryStartFailed) as exc:
        raise click.ClickException(str(exc)) from exc
    exit_after_stop()
