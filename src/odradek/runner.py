"""Run brokers in this process until SIGINT or SIGTERM, then shut them down cleanly (flush, checkpoints).

``odradek up`` runs a :class:`~odradek.cluster.LocalCluster` (a cluster of one unless ``--brokers N``) on the
embedded, journaled coordination store; ``odradek broker`` runs one broker of a cluster coordinated by ZooKeeper.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from odradek.broker.config import BrokerConfig
from odradek.broker.server import Broker
from odradek.cluster import READY_WAIT_S, LocalCluster
from odradek.migration import refuse_for_zookeeper
from odradek.ready_file import ready_line, write_ready_file

if TYPE_CHECKING:
    from odradek.schema_registry.server import SchemaRegistry

log = logging.getLogger(__name__)


async def run_zookeeper_broker(config: BrokerConfig, ready_file: Path | None, zookeeper: str,
                               metrics_port: int | None = None, schema_registry_port: int | None = None) -> None:
    from odradek.coordination import ZooKeeperBackend

    refuse_for_zookeeper(Path(config.data_dir))
    broker = Broker(config, ZooKeeperBackend(zookeeper), metrics_port=metrics_port)
    await broker.start()
    # Ready, as for ``odradek up``, once the broker has heard from a controller: an admin client that connects at
    # once otherwise reads controller -1 and librdkafka waits out its whole request timeout before asking again.
    # A cluster without a controller for that long still gets a serving broker.
    if not await broker.metadata.wait_until(lambda: broker.metadata.controller_id >= 0, READY_WAIT_S):
        log.warning("no controller heard of in %.0f s; serving anyway", READY_WAIT_S)
    registry = await _start_registry(broker, lambda name: "{}:{}".format(*broker.advertised[name]), broker.host,
                                     schema_registry_port, broker.stop)
    _show_in_consoles(registry, [broker])

    async def stop_all() -> None:
        if registry is not None:
            await registry.stop()
        if not broker.halted.is_set():
            await broker.stop()

    endpoints = {"bootstrap.servers": f"{broker.host}:{broker.port}"}
    if registry is not None:
        endpoints["schema.registry.url"] = registry.url
    if broker.metrics_port is not None:
        endpoints["metrics"] = f"http://{broker.host}:{broker.metrics_port}/metrics"
    if config["listeners"]:
        endpoints.update({f"bootstrap.servers.{name}": f"{host}:{port}"
                          for name, (host, port) in broker.advertised.items()})
    await _serve(endpoints, ready_file, stop_all, broker.halted)


REGISTRY_BROKERS_WAIT_S = 60.0
"""How long a registry beside brokers waits for as many live brokers as its topic's replication factor (Confluent's
``kafkastore.init.timeout.ms`` is as long)."""


async def _start_registry(broker: Broker, addresses: Callable[[str], str], host: str, port: int | None,
                          stop_brokers: Callable[[], Awaitable[None]]) -> SchemaRegistry | None:
    """The schema registry beside the brokers (None when ``port`` is None), connected and guarded as
    :mod:`odradek.schema_registry.beside_brokers` decides from ``broker``'s listeners; on failure the brokers are
    stopped and the failure is one clear message."""
    if port is None:
        return None
    from odradek.clock import SystemClock
    from odradek.schema_registry.beside_brokers import registry_security
    from odradek.schema_registry.server import SchemaRegistry

    try:
        security = registry_security(broker.config.values, broker.listeners, broker.outgoing, addresses,
                                     SystemClock())
    except ValueError as exc:  # TlsConfigError included: ssl.* that make no server context
        await stop_brokers()
        raise RegistryStartFailed(f"cannot serve the schema registry: {exc}") from exc
    # _schemas replicated as the cluster's internal topics are: brokers started together (``odradek broker`` each)
    # get a registry topic that survives one of them, instead of one made before the others registered
    replicas = min(3, int(broker.config.values["offsets.topic.replication.factor"]))
    registry = SchemaRegistry(security.bootstrap, host=host, port=port, client_config=security.client_config,
                              basic_auth=security.basic_auth, ssl_context=security.server_tls,
                              replication_factor=replicas, brokers_wait_s=REGISTRY_BROKERS_WAIT_S)
    registry.registry.forward_ssl = security.forward_tls
    try:
        await registry.start()
    except Exception as exc:
        await registry.stop()
        await stop_brokers()
        raise RegistryStartFailed(f"cannot serve the schema registry on {host}:{port}: {exc or repr(exc)}") from exc
    return registry


def _show_in_consoles(registry: SchemaRegistry | None, brokers: Iterable[Broker]) -> None:
    """Each broker's web console lists the registry's subjects (peers' consoles through these brokers' views)."""
    if registry is not None:
        for broker in brokers:
            broker.schema_registry_view = registry.console_view


class RegistryStartFailed(RuntimeError):
    """The schema registry could not start (its port taken, the cluster unreachable)."""


async def run_cluster(cluster: LocalCluster, ready_file: Path | None, schema_registry_port: int | None = None) -> None:
    await cluster.start()
    first = next(b for _i, b in sorted(cluster.brokers.items()) if b.running)
    registry = await _start_registry(first, cluster.bootstrap_on, cluster.host, schema_registry_port, cluster.stop)
    _show_in_consoles(registry, cluster.brokers.values())

    async def stop_all() -> None:
        if registry is not None:
            await registry.stop()
        await cluster.stop()

    endpoints = cluster.endpoints()
    if registry is not None:  # right after the bootstrap servers
        endpoints = {"bootstrap.servers": endpoints.pop("bootstrap.servers"), "schema.registry.url": registry.url,
                     **endpoints}
    await _serve(endpoints, ready_file, stop_all)


async def serve_until_signal(endpoints: Mapping[str, str], ready_file: Path | None,
                             shutdown: Callable[[], Awaitable[None]]) -> None:
    """Announce the endpoints (stdout and the ready file) and run until SIGINT or SIGTERM, then ``shutdown``."""
    await _serve(endpoints, ready_file, shutdown)


async def _serve(endpoints: Mapping[str, str], ready_file: Path | None, shutdown: Callable[[], Awaitable[None]],
                 halted: asyncio.Event | None = None) -> None:
    """Announce readiness (one stdout line, and the ready file with one endpoint per line), then run until SIGINT
    or SIGTERM (or until the broker stopped itself: ``halted``)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(ready_line(endpoints), flush=True)
    if ready_file is not None:
        write_ready_file(ready_file, endpoints)
    try:
        waits = [asyncio.ensure_future(stop.wait())]
        if halted is not None:
            waits.append(asyncio.ensure_future(halted.wait()))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        log.info("signal received: shutting down" if stop.is_set() else "the broker stopped itself")
    finally:
        await shutdown()


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def exit_after_stop() -> NoReturn:
    """End the process at once after the brokers have stopped, without the interpreter's teardown.

    By then every log is closed, synced and checkpointed and the coordination session is closed: what is left
    is freeing the broker's objects one by one (0.4 s of a clean stop with 10,000 logs, bench/clean_stop.py),
    memory the kernel reclaims in one go. Log handlers and the standard streams are flushed first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
