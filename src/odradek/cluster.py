"""One or more brokers and the embedded coordination store in one process, with fault injection for tests.

``odradek up`` runs a :class:`LocalCluster`, of one broker by default and of ``--brokers N`` otherwise: each
broker listens on its own loopback port, keeps its own data directory (``<data-dir>/broker-<id>``) and its own
coordination session, and runs its own controller, exactly as separate processes on ZooKeeper would; only the
store is shared memory. The fault hooks act like the failures they name: :meth:`LocalCluster.kill` drops a broker
without flushing or checkpointing and leaves its session to expire after its timeout, as a SIGKILLed process does;
:meth:`LocalCluster.isolate` cuts it off from its peers and the store, as a network partition does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from odradek.broker.config import BrokerConfig
from odradek.broker.metadata import MetadataCache
from odradek.broker.server import Broker
from odradek.clock import Clock, SystemClock
from odradek.coordination.durable import DurableEmbeddedBackend
from odradek.migration import migrate
from odradek.security.listeners import rebind

log = logging.getLogger(__name__)

READY_WAIT_S = 30.0


class LocalCluster:
    def __init__(
        self,
        brokers: int,
        data_dir: Path | str,
        *,
        racks: Sequence[str] | None = None,
        overrides: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        ports: Sequence[int] | None = None,
        clock: Clock | None = None,
        first_broker_id: int = 0,
        metrics_ports: Sequence[int] | None = None,
    ) -> None:
        """Brokers get the ids ``first_broker_id .. first_broker_id + brokers - 1``; with ``metrics_ports`` (one
        per broker, 0 for any free port) each serves ``/metrics`` and the console there."""
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if racks and len(racks) not in (1, brokers):
            raise ValueError(f"give one rack per broker ({brokers}) or one for all, not {len(racks)}")
        if first_broker_id < 0:
            raise ValueError(f"broker ids start at 0, not {first_broker_id}")
        self.size = brokers
        self.broker_ids = list(range(first_broker_id, first_broker_id + brokers))
        self.data_dir = Path(data_dir)
        self.racks = list(racks or [])
        self.overrides = dict(overrides or {})
        self.host = host
        self.ports = list(ports or [0] * brokers)
        if metrics_ports is not None and len(metrics_ports) != brokers:
            raise ValueError(f"give one metrics port per broker ({brokers}), not {len(metrics_ports)}")
        self.metrics_ports = None if metrics_ports is None else list(metrics_ports)
        self.clock = clock or SystemClock()
        self.backend = DurableEmbeddedBackend(self.data_dir / "coordination", self.clock)
        self.brokers: dict[int, Broker] = {}
        self._expiry: asyncio.Task[None] | None = None

    def _config(self, broker_id: int, port: int | None = None,
                listener_ports: Mapping[str, int] | None = None) -> BrokerConfig:
        """``listener_ports``: a restarted broker's bound ports, kept; otherwise fixed ``listeners`` ports are
        shifted by the broker's position, as ``--port`` is."""
        settings = dict(self.overrides)
        settings["broker.id"] = str(broker_id)
        if settings.get("listeners"):
            position = self.broker_ids.index(broker_id) if broker_id in self.broker_ids else len(self.broker_ids)
            ports = dict(listener_ports or {})
            settings["listeners"] = rebind(
                settings["listeners"],
                lambda name, fixed: ports.get(name, fixed + position if fixed else 0))
        if self.racks:
            position = self.broker_ids.index(broker_id) if broker_id in self.broker_ids else broker_id
            settings["broker.rack"] = self.racks[position % len(self.racks)]
        settings.setdefault("offsets.topic.replication.factor", str(min(3, self.size)))
        for name in ("log.dirs", "log.dir"):
            if settings.get(name):  # every broker of the cluster gets its own sub-directory of each log dir
                settings[name] = ",".join(str(Path(d.strip()) / f"broker-{broker_id}")
                                          for d in settings[name].split(",") if d.strip())
        if port is None:
            position = self.broker_ids.index(broker_id) if broker_id in self.broker_ids else len(self.ports)
            port = self.ports[position] if position < len(self.ports) else 0
        return BrokerConfig.build(
            host=self.host, port=port, data_dir=str(self.data_dir / f"broker-{broker_id}"), overrides=settings
        )

    def _metrics_port(self, broker_id: int, old: Broker | None) -> int | None:
        if self.metrics_ports is None:
            return None
        if old is not None and old.metrics_port is not None:
            return old.metrics_port  # a restart keeps its metrics port too
        position = self.broker_ids.index(broker_id) if broker_id in self.broker_ids else -1
        return self.metrics_ports[position] if position >= 0 else 0

    @property
    def metrics_endpoints(self) -> str:
        """``http://host:port/metrics`` of every running broker that serves metrics, comma-separated."""
        return ",".join(f"http://{b.host}:{b.metrics_port}/metrics" for _i, b in sorted(self.brokers.items())
                        if b.running and b.metrics_port is not None)

    @property
    def bootstrap(self) -> str:
        """Every running broker's first listener (``host:port,...``)."""
        return ",".join(f"{b.host}:{b.port}" for _i, b in sorted(self.brokers.items()) if b.running)

    def bootstrap_on(self, listener: str) -> str:
        """Every running broker's address on ``listener`` (``host:port,...``)."""
        return ",".join(f"{host}:{port}" for _i, b in sorted(self.brokers.items()) if b.running
                        for name, (host, port) in b.advertised.items() if name == listener)

    def endpoints(self) -> dict[str, str]:
        """What the ready file lists (:mod:`odradek.ready_file`): ``bootstrap.servers``, ``metrics`` when the
        brokers serve it, and ``bootstrap.servers.<LISTENER>`` per listener when ``listeners`` is set."""
        out = {"bootstrap.servers": self.bootstrap}
        if self.metrics_ports is not None:
            out["metrics"] = self.metrics_endpoints
        if self.overrides.get("listeners"):
            out.update({f"bootstrap.servers.{name}": self.bootstrap_on(name) for name in self.listener_names})
        return out

    @property
    def listener_names(self) -> list[str]:
        """The advertised listeners' names, in order (the first one's addresses are :attr:`bootstrap`)."""
        running = [b for _i, b in sorted(self.brokers.items()) if b.running]
        return list(running[0].advertised) if running else []

    async def start(self) -> None:
        self._expiry = asyncio.create_task(self.backend.run_expiry(), name="embedded-store-expiry")
        await migrate(self.data_dir, self.backend, self.broker_ids[0])
        for broker_id in self.broker_ids:
            await self.start_broker(broker_id)
        # Ready means a client can use it: every broker has heard from the controller (its first UpdateMetadata
        # carries every partition), so a client that connects at once does not see its topics as unknown.
        for broker in self.brokers.values():
            cache = broker.metadata
            await cache.wait_until(functools.partial(_has_controller, cache), READY_WAIT_S)

    async def start_broker(self, broker_id: int) -> Broker:
        old = self.brokers.get(broker_id)
        # a restart keeps its port(s)
        config = self._config(broker_id, port=old.port if old is not None else None,
                              listener_ports=old.bound_ports if old is not None else None)
        broker = Broker(config, self.backend, self.clock, self._metrics_port(broker_id, old))
        await broker.start()
        self.brokers[broker_id] = broker
        return broker

    async def stop(self) -> None:
        """Stop the whole cluster: its brokers leave together, flushing and checkpointing as a clean stop does.

        Every controller stops first, the active one last, so none is left to elect leaders for partitions whose
        every replica is leaving (elections that cannot succeed, and requests to brokers already gone); then no
        follower fetches from a leader that is going."""
        running = [broker for broker in self.brokers.values() if broker.running]
        for broker in sorted(running, key=lambda b: b.controller.is_active):
            await broker.controller.stop()
        for broker in running:
            await broker.replicas.fetchers.stop()
        for broker in running:
            await broker.stop(controlled=False)
        if self._expiry is not None:
            self._expiry.cancel()
            await asyncio.gather(self._expiry, return_exceptions=True)
        await self.backend.close()

    # --- faults ------------------------------------------------------------------------------------------------

    async def stop_broker(self, broker_id: int, controlled: bool = True) -> None:
        """A clean shutdown, as SIGTERM gives: leaderships handed over first (when controlled), logs flushed."""
        await self.brokers[broker_id].stop(controlled=controlled)

    async def kill(self, broker_id: int) -> None:
        """As SIGKILL: no controlled shutdown, no flush or checkpoint; the session expires after its timeout."""
        broker = self.brokers[broker_id]
        self._suspend(broker)
        await broker.crash()

    async def restart(self, broker_id: int, controlled: bool = True) -> Broker:
        broker = self.brokers[broker_id]
        if broker.running:
            await broker.stop(controlled=controlled)
        return await self.start_broker(broker_id)

    def _suspend(self, broker: Broker) -> None:
        if broker.membership.session is not None:
            self.backend.suspend(broker.membership.session.session_id)

    def _resume(self, broker: Broker) -> None:
        if broker.membership.session is not None:
            with contextlib.suppress(Exception):
                self.backend.resume(broker.membership.session.session_id)

    def expire_session(self, broker_id: int) -> None:
        session = self.brokers[broker_id].membership.session
        if session is not None:
            self.backend.expire(session.session_id)

    def isolate(self, broker_id: int) -> None:
        """Cut the broker off from its peers and the store; clients and peers see connections refused or dropped."""
        broker = self.brokers[broker_id]
        self._suspend(broker)
        broker.set_isolated(True)

    def pause(self, broker_id: int) -> None:
        """Freeze the broker as SIGSTOP would: its session goes silent (and expires after
        ``zookeeper.session.timeout.ms`` unless resumed first), nothing it holds is answered or sent."""
        broker = self.brokers[broker_id]
        self._suspend(broker)
        broker.pause()

    def resume(self, broker_id: int) -> None:
        """SIGCONT: the broker runs on; if its session expired meanwhile it registers again, as Kafka's does."""
        broker = self.brokers[broker_id]
        self._resume(broker)
        broker.resume()

    def heal(self, broker_id: int) -> None:
        broker = self.brokers[broker_id]
        broker.set_isolated(False)
        self._resume(broker)

    def controller_id(self) -> int | None:
        """The active controller with the highest epoch: a paused or cut-off one may still believe it is active
        after another has taken over (the zombie its epoch fences)."""
        active = [
            (broker.controller.epoch, broker_id) for broker_id, broker in self.brokers.items()
            if broker.running and broker.controller.is_active
        ]
        return max(active)[1] if active else None


def _has_controller(cache: MetadataCache) -> bool:
    return cache.controller_id >= 0
