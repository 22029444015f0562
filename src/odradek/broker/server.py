"""The broker: the composition root of its parts, its listener, and its lifecycle.

Every broker is a member of a cluster, a cluster of one included: it registers in the coordination store, runs the
seeds' controller (one broker's is active), and hosts the replicas the controller assigns it. The parts, each in a
module of its own and each given only what it works with:

* :class:`~odradek.broker.replica_manager.ReplicaManager`: partitions, logs and follower fetchers;
* :mod:`odradek.broker.link`: membership, the controller's requests, ISR propagation, producer-id blocks, the
  config-change watch, topic administration, client quotas, controlled shutdown;
* :class:`~odradek.controller.Controller`: the ZooKeeper-era controller;
* :class:`~odradek.broker.group.GroupCoordinator`: consumer groups on ``__consumer_offsets``;
* :class:`~odradek.broker.txn.service.Transactions`: the transaction coordinator on ``__transaction_state``;
* :class:`~odradek.broker.services.Services`: what request handlers may use.

Everything runs on one asyncio event loop. A :class:`Broker` is constructed with its configuration, a coordination
backend and an injected clock, started with :meth:`Broker.start` and stopped with :meth:`Broker.stop`, which hands
its leaderships away first (controlled shutdown), then flushes logs and writes checkpoints. Several brokers can share
one process (``odradek up --brokers N``); nothing here is global.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from odradek import heap
from odradek.broker.api_registry import load_apis
from odradek.broker.config import BrokerConfig
from odradek.broker.connection import Connection
from odradek.broker.faults import FaultState
from odradek.broker.fetch_sessions import FetchSessionCache
from odradek.broker.fetcher import FetchSettings
from odradek.broker.group import GroupConfig, GroupCoordinator
from odradek.broker.group.config import OFFSETS_TOPIC
from odradek.broker.limits import ConnectionQuotas, LimitSettings, idle_expired
from odradek.broker.link.acl_watch import AclWatch
from odradek.broker.link.broker_configs import BrokerConfigService
from odradek.broker.link.client_quotas import ClientQuotaService
from odradek.broker.link.config_watch import ConfigWatch
from odradek.broker.link.controlled_shutdown import shut_down_controlled
from odradek.broker.link.controller_requests import ControllerRequests
from odradek.broker.link.isr_propagation import IsrPropagation
from odradek.broker.link.membership import Membership, Registration
from odradek.broker.link.producer_id_blocks import ProducerIdBlocks
from odradek.broker.link.topic_admin import TopicAdmin
from odradek.broker.log import LogManager
from odradek.broker.metadata import BrokerEndpoint, MetadataCache
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.quotas import ClientQuotas
from odradek.broker.replica import Partition
from odradek.broker.replica_manager import OffsetsTopicLog, ReplicaManager
from odradek.broker.replication_quota import LEADER_RATE
from odradek.broker.services import Services
from odradek.broker.stats import BrokerStats
from odradek.broker.txn.config import TxnConfig
from odradek.broker.txn.service import Transactions
from odradek.clock import Clock, SystemClock
from odradek.controller import Controller, TcpTransport
from odradek.coordination import Backend, CoordinationError
from odradek.coordination import znodes as zn
from odradek.coordination.store import ConnectionLossError, SessionExpiredError
from odradek.errors import KafkaError
from odradek.log_limit import LogLimiter
from odradek.observe.http import ObserveServer
from odradek.observe.metrics import make_registry
from odradek.security.authorizer import from_config as authorizer_from_config
from odradek.security.broker_client import OutgoingSecurity
from odradek.security.listeners import Listener, advertised_host, listener_config
from odradek.security.sasl import SaslSettings, sasl_settings
from odradek.security.sasl_errors import SaslExchangeError
from odradek.security.scram import ScramCredential, ScramFormatError
from odradek.security.scram_store import read_credential
from odradek.security.tls import ListenerTls, TlsServer
from odradek.tasks import spawn

log = logging.getLogger(__name__)

TICK_INTERVAL_S = 0.1
LOG_INTERVAL_MS = 30_000  # an expected ZooKeeper failure of the tick is logged at most this often
LOOP_STALL_WARN_S = 1.0


class _GroupsFollowOffsets:
    """Internal topics follow their leaders: this broker coordinates the groups of the partitions it leads."""

    def __init__(self, groups: GroupCoordinator) -> None:
        self.groups = groups

    def on_leadership(self, part: Partition) -> None:
        if part.topic == OFFSETS_TOPIC:
            if part.is_leader:
                self.groups.load_partition(part.index)
            else:
                self.groups.unload_partition(part.index)

    def on_removed(self, topic: str, index: int) -> None:
        if topic == OFFSETS_TOPIC:
            self.groups.unload_partition(index)


class Broker:
    def __init__(self, config: BrokerConfig, backend: Backend, clock: Clock | None = None,
                 metrics_port: int | None = None) -> None:
        """``metrics_port``: serve ``/metrics`` and the console there (0 picks a free port); None serves none."""
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.broker_id = config.broker_id
        self.data_dir = Path(config.data_dir)
        self.listeners = listener_config(config.values, config.host, config.port)
        self.sasl: dict[str, SaslSettings] = {
            listener.name: sasl_settings(config.values, listener.name, self._scram_credential)
            for listener in self.listeners.listeners if listener.sasl
        }
        self.tls: dict[str, ListenerTls] = {
            listener.name: ListenerTls.build(functools.partial(config.for_listener, listener.name))
            for listener in self.listeners.listeners if listener.tls
        }
        first = self.listeners.advertised[0]
        self.host = first.host or config.host
        self.port = first.port
        self.advertised: dict[str, tuple[str, int]] = {}
        """Every advertised listener's address, in order, once started (the first names the ready line)."""
        self.outgoing = OutgoingSecurity.from_config(config.values, self.listeners)
        """How this broker reaches the others (every outgoing broker connection opens with it)."""
        self.faults = FaultState()
        self.schema_registry_view: Callable[[], dict[str, Any]] | None = None
        """What the console shows of a schema registry started beside this broker (set by whoever starts one)."""
        self.metadata = MetadataCache(cluster_id="")
        self.replicas = ReplicaManager(
            self.broker_id, self.clock, self.metadata,
            FetchSettings(config["replica.fetch.max.bytes"], config["replica.fetch.wait.max.ms"], self.outgoing),
            self.faults,
        )
        self.membership = Membership(backend, self.broker_id, int(config["zookeeper.session.timeout.ms"]),
                                     self.clock, self.faults)
        self.groups = GroupCoordinator(
            broker_id=self.broker_id,
            clock=self.clock,
            offsets_log=OffsetsTopicLog(self.replicas, OFFSETS_TOPIC, config["offsets.commit.timeout.ms"]),
            config=GroupConfig.from_overrides({k: str(v) for k, v in config.values.items()}),
        )
        self.replicas.listeners.append(_GroupsFollowOffsets(self.groups))
        self.groups.topics_source = lambda: {
            name: (meta.topic_id, len(meta.partitions)) for name, meta in self.metadata.topics.items()
        }
        producer_ids = ProducerIdManager(ProducerIdBlocks(self.membership).allocate)
        self.transactions = Transactions(
            self.broker_id, self.clock, self.metadata, self.replicas, self.groups,
            TxnConfig.from_values(config.values), producer_ids.next_id, self.faults, self.outgoing,
        )
        self.replicas.listeners.append(self.transactions)
        self.controller_requests = ControllerRequests(self.membership, self.replicas, self.metadata,
                                                      self._drop_offsets_of, self.listeners.inter_broker)
        self.isr = IsrPropagation(self.membership, self.clock, lambda: self.controller_requests.controller_epoch)
        self.replicas.isr_writer = self._write_isr
        self.config_watch = ConfigWatch(self.membership, self.replicas.apply_topic_config)
        self.client_quotas = ClientQuotaService(
            self.membership, ClientQuotas.create(config["quota.window.num"], config["quota.window.size.seconds"]),
            self.clock,
        )
        self.config_watch.entity_listeners.append(self.client_quotas.entity_changed)
        self.broker_configs = BrokerConfigService(self.membership, config)
        self.broker_configs.listeners.append(self._dynamic_config_changed)
        self.config_watch.entity_listeners.append(self.broker_configs.entity_changed)
        self.transport = TcpTransport(client_id=f"broker-{self.broker_id}", gate=self.faults.resumed,
                                      security=self.outgoing)
        controller_props = config.properties()
        controller_props["inter.broker.listener.name"] = self.listeners.inter_broker
        self.controller = Controller(self.broker_id, self.membership.current_session, self.clock, self.transport,
                                     controller_props, gate=self.faults.resumed)
        self.topics = TopicAdmin(self.membership, self.metadata, config)
        self.authorizer = authorizer_from_config(config.values, self.membership.current)
        self.acl_watch = AclWatch(self.membership, self.authorizer) if self.authorizer is not None else None
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"], self.clock)
        self.services = Services(
            broker_id=self.broker_id, config=config, metadata=self.metadata,
            replicas=self.replicas, topics=self.topics, groups=self.groups, transactions=self.transactions,
            producer_ids=producer_ids,
            controller=self.controller, controller_requests=self.controller_requests, quotas=self.client_quotas,
            broker_configs=self.broker_configs,
            apis=load_apis(), stats=self.replicas.stats, authorizer=self.authorizer,
            fetch_sessions=self.fetch_sessions,
        )
        self.metrics_port = metrics_port
        self.http: ObserveServer | None = None
        self._servers: list[asyncio.Server | TlsServer] = []
        self._bound_ports: dict[str, int] = {}
        self._http_port = -1
        self._tick_task: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.limits = LimitSettings.from_values(config.values)
        self.connection_quotas = ConnectionQuotas(self.limits, self.listeners.inter_broker,
                                                  len(self.listeners.listeners))
        self._live: set[Connection] = set()
        self.running = False
        self.stopping = False
        # set when the broker stopped itself (every log directory failed); its process should exit, as Kafka's halts
        self.halted = asyncio.Event()
        self.serving = asyncio.Event()  # set once start-up is complete; requests wait for it, as Kafka's do

    async def _scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """A user's stored SCRAM credential, read on each authentication (a change applies to the next one)."""
        try:
            return await read_credential(self.membership.current(), mechanism, user)
        except (CoordinationError, KafkaError, ScramFormatError) as exc:
            raise SaslExchangeError(f"Authentication failed: Credentials could not be obtained ({exc})") from None

    @property
    def stats(self) -> BrokerStats:
        return self.replicas.stats

    async def _write_isr(self, part: Partition, new_isr: list[int]) -> int | None:
        """The ISR writer, counting Kafka's IsrShrinks and IsrExpands for what was written."""
        before = len(part.isr)
        version = await self.isr.write_isr(part, new_isr)
        if version is not None:
            self.stats.isr_changed(before, len(new_isr))
        return version

    def _dynamic_config_changed(self) -> None:
        """A dynamic broker config was applied to :attr:`config`: the parts that read it at start follow."""
        self.replicas.apply_topic_defaults(self.config.topic_defaults())
        rate = self.config.dynamic_broker.get(LEADER_RATE, self.config.dynamic_default.get(LEADER_RATE))
        try:
            self.replicas.leader_quota.set_rate(rate)
        except ValueError:
            log.error("broker %d: %s=%s is no number; replication is not throttled", self.broker_id, LEADER_RATE, rate)
            self.replicas.leader_quota.set_rate(None)
        if self._bound_ports:
            self._readvertise()

    def _readvertise(self) -> None:
        """A dynamic ``advertised.listeners``: the new endpoints (a port of 0: the listener's own) are registered in
        place, as Kafka's DynamicListenerConfig re-registers the broker; listeners themselves stay bound as they
        were, and a value that names a listener the broker does not have is logged and left unapplied."""
        try:
            wanted = listener_config(self.config.values, self.config.host, self.config.port)
        except ValueError as exc:
            log.error("broker %d: advertised.listeners not applied: %s", self.broker_id, exc)
            return
        advertised: dict[str, tuple[str, int]] = {}
        for listener in wanted.advertised:
            if listener.name not in self._bound_ports:
                log.error("broker %d: advertised.listeners not applied: no listener %s", self.broker_id, listener.name)
                return
            advertised[listener.name] = (advertised_host(listener), listener.port or self._bound_ports[listener.name])
        if advertised == self.advertised:
            return
        self.advertised = advertised
        self.host, self.port = next(iter(advertised.values()))
        spawn(self._reregister(), f"broker-{self.broker_id}-readvertise")

    async def _reregister(self) -> None:
        await self.membership.update_registration(self._registration())
        self.controller.registration_changed()

    def _drop_offsets_of(self, topic: str) -> None:
        # Kafka's coordinators drop a deleted topic's committed offsets (tombstones in __consumer_offsets)
        spawn(self.groups.remove_offsets_for_topics([topic]), f"drop-offsets-{topic}")

    # --- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        heap.tune()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        await self._open_listeners()
        inter = self.advertised[self.listeners.inter_broker]
        self.metadata.set_broker(BrokerEndpoint(
            self.broker_id, inter[0], inter[1], self.config.rack,
            tuple((name, host, port) for name, (host, port) in self.advertised.items())))
        http_port = -1
        if self.metrics_port is not None:
            self.http = ObserveServer(self, make_registry(self, self.services.apis))
            http_port = self.metrics_port = await self.http.start(self.config.host, self.metrics_port)
        self.metadata.cluster_id = await self.membership.connect()
        await self.broker_configs.load()  # before the logs open: they open with the dynamic log defaults
        overrides = await zn.read_all_topic_configs(self.membership.current())
        logs = LogManager(
            [Path(d) for d in self.config.log_dirs], self.clock, self.config.topic_defaults(), broker_id=self.broker_id,
            cluster_id=self.metadata.cluster_id,
            retention_check_interval_ms=self.config["log.retention.check.interval.ms"],
        )
        # On a thread: recovering thousands of logs takes seconds, and the event loop must keep the coordination
        # session alive meanwhile (a blocked loop misses its pings and the session expires mid start-up).
        await asyncio.to_thread(logs.load, overrides)
        self.replicas.attach_logs(logs)
        for topic, configs in overrides.items():
            self.replicas.leader_quota.set_topic(topic, configs)
        loop = asyncio.get_running_loop()

        def dir_failed(directory: Path) -> None:  # on whichever thread hit the disk error
            loop.call_soon_threadsafe(self._log_dir_failed, logs, directory)

        logs.on_dir_failure.append(dir_failed)
        self._http_port = http_port
        await self.membership.register(self._registration())
        await self.controller.start()
        self._tick_task = asyncio.create_task(self._tick_loop(), name=f"broker-{self.broker_id}-tick")
        self.running = True
        self.serving.set()
        log.info("broker %d listening on %s (log dirs %s)", self.broker_id,
                 ",".join(f"{name}://{host}:{port}" for name, (host, port) in self.advertised.items()),
                 ",".join(self.config.log_dirs))

    def _registration(self) -> Registration:
        return Registration(
            self.broker_id, self.host, self.port, self.config.rack, self._http_port,
            endpoints=tuple(zn.Endpoint(name, host, port) for name, (host, port) in self.advertised.items()),
            protocol_map={name: self.listeners.protocol_map[name] for name in self.advertised})

    async def _open_listeners(self) -> None:
        """Bind every listener (port 0: each its own free port) and work out what each advertises."""
        bound: dict[str, tuple[str, int]] = {}
        for listener in self.listeners.listeners:
            accept = functools.partial(self._accept, listener)
            tls = self.tls.get(listener.name)
            if tls is not None:
                server: asyncio.Server | TlsServer = await tls.serve(accept, listener.host or None, listener.port,
                                                                     limit=1 << 20)
            else:
                server = await asyncio.start_server(accept, listener.host or None, listener.port, limit=1 << 20)
            self._servers.append(server)
            bound[listener.name] = (listener.host, server.sockets[0].getsockname()[1])
        self._bound_ports = {name: port for name, (_host, port) in bound.items()}
        self.advertised = {}
        for listener in self.listeners.advertised:
            port = listener.port or bound[listener.name][1]
            self.advertised[listener.name] = (advertised_host(listener), port)
        self.host, self.port = next(iter(self.advertised.values()))

    @property
    def bound_ports(self) -> dict[str, int]:
        """Each listener's bound port, kept after a stop (a restart binds the same ones again)."""
        return dict(self._bound_ports)

    def _log_dir_failed(self, logs: LogManager, directory: Path) -> None:
        """Kafka's LogDirFailureHandler: tell the controller (it asks which replicas are offline and moves their
        leadership away); with no directory left, stop the broker as Kafka halts."""
        if self.stopping:
            return
        if len(logs.offline_dirs) == len(logs.log_dirs):
            log.error("broker %d: every log directory has failed, shutting down", self.broker_id)
            spawn(self._halt_for_storage(), f"broker-{self.broker_id}-no-log-dirs")
            return
        spawn(self._announce_log_dir_failure(directory), f"broker-{self.broker_id}-log-dir-event")

    async def _halt_for_storage(self) -> None:
        try:
            await self.stop(controlled=False)
        finally:
            self.halted.set()

    async def _announce_log_dir_failure(self, directory: Path) -> None:
        await self.membership.current().create(
            zn.LOG_DIR_EVENT_PREFIX, zn.LogDirEventNotification(self.broker_id).to_json(), sequential=True)
        log.info("broker %d: told the controller log directory %s failed", self.broker_id, directory)

    async def stop(self, controlled: bool = True) -> None:
        """Stop serving; first hand leaderships away (controlled shutdown) when ``controlled``."""
        if controlled and self.config["controlled.shutdown.enable"]:
            await self.controlled_shutdown()
        await self._halt()
        await self.membership.close()
        await self.transactions.shutdown()
        await self.groups.shutdown()
        self.replicas.fail_waiters()
        if self.replicas.logs is not None:
            # On a thread, as loading is: flushing and snapshotting 10,000 logs takes seconds, and in
            # `odradek up` the other brokers share this event loop (nothing else touches these logs any more).
            await asyncio.to_thread(self.replicas.logs.close)
        log.info("broker %d stopped", self.broker_id)

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships away (it keeps serving meanwhile)."""
        await shut_down_controlled(self.membership, self.metadata, self.transport,
                                   int(self.config["controlled.shutdown.max.retries"]))

    async def crash(self) -> None:
        """Stop as a killed process stops: nothing flushed, checkpointed or handed over (fault injection)."""
        await self._halt()
        await self.membership.abandon()
        await self.transactions.shutdown()
        await self.groups.shutdown()
        self.replicas.fail_waiters()
        if self.replicas.logs is not None:
            self.replicas.logs.abandon()
        log.warning("broker %d crashed (fault injection)", self.broker_id)

    async def _halt(self) -> None:
        """What a stop and a crash share: no more requests, ticks, fetches, controller or config watch."""
        self.stopping = True
        self.running = False
        for server in self._servers:
            server.close()
        if self.http is not None:
            await self.http.stop()
        if self._tick_task is not None:
            self._tick_task.cancel()
            await asyncio.gather(self._tick_task, return_exceptions=True)
        await self._close_connections()
        await self.replicas.fetchers.stop()
        self.config_watch.stopped = True
        if self.acl_watch is not None:
            self.acl_watch.stopped = True
        await self.controller.stop()
        await self.transport.close()

    async def _close_connections(self) -> None:
        """Close every client socket, then make sure each handler task has ended.

        Closing the socket ends a handler blocked on a read; cancelling ends one waiting in a handler. Python 3.11's
        wait_for can swallow a cancellation that races a completing future, so we cancel until they are done.
        """
        for writer in list(self._writers):
            writer.close()
        while self._connections:
            for task in list(self._connections):
                task.cancel()
            await asyncio.wait(list(self._connections), timeout=1.0)

    # --- fault injection -------------------------------------------------------------------------------------

    def pause(self) -> None:
        """Stop doing anything (connections stay open, nothing is answered) until resumed."""
        self.faults.resumed.clear()
        log.warning("broker %d paused (fault injection)", self.broker_id)

    def resume(self) -> None:
        self.faults.resumed.set()
        log.warning("broker %d resumed", self.broker_id)

    def set_isolated(self, isolated: bool) -> None:
        """Drop every connection in and out while isolated, as a network partition would."""
        self.faults.isolated = isolated
        if isolated:
            for writer in list(self._writers):
                writer.close()
            self.replicas.fetchers.drop_connections()

    # --- the listener and background work --------------------------------------------------------------------

    async def _accept(self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.faults.isolated:
            writer.close()
            return
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if peer else ""
        refused = self.connection_quotas.admit(listener.name, host)
        if refused is not None:
            log.info("broker %d: %s", self.broker_id, refused)
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        connection: Connection | None = None
        try:
            tls = self.tls.get(listener.name)
            certified = None
            if tls is not None:
                # the handshake is done (TlsServer); on SSL the client's certificate names it
                certified = tls.principal_of(writer, f"{host}:{peer[1]}" if peer else "?")
                if certified is None:
                    return
            connection = Connection(self.services, self, reader, writer, listener.name, self.sasl.get(listener.name))
            if certified is not None and not listener.sasl:
                connection.principal = certified
            self._live.add(connection)
            await connection.serve()
        finally:
            if connection is not None:
                self._live.discard(connection)
            self._connections.discard(task)
            self._writers.discard(writer)
            self.connection_quotas.release(listener.name, host)

    def _close_idle(self) -> None:
        """connections.max.idle.ms: close the connections that have neither read nor written for that long."""
        now = self.clock.monotonic_ms()
        idle_ms = self.limits.idle_ms
        for connection in idle_expired(((c, c.idle_since()) for c in self._live), now, idle_ms):
            log.info("broker %d: closing connection %s, idle for %d ms (connections.max.idle.ms=%d)",
                     self.broker_id, connection.peer, now - connection.last_active_ms, idle_ms)
            connection.expire()

    async def _tick_loop(self) -> None:
        lag_max = self.config["replica.lag.time.max.ms"]
        next_isr_check = 0
        noise = LogLimiter(self.clock, LOG_INTERVAL_MS)
        loop = asyncio.get_running_loop()
        while True:
            asleep = loop.time()
            await asyncio.sleep(TICK_INTERVAL_S)
            late = loop.time() - asleep - TICK_INTERVAL_S
            self.stats.loop_lag.observe(max(late, 0.0))
            if late > LOOP_STALL_WARN_S:
                # Everything on this loop (client requests, fetchers, the coordination session's pings) waited
                # this long: the first thing to look at when a session expires under load.
                log.warning("broker %d: event loop stalled for %.1f s", self.broker_id, late)
            await self.faults.resumed.wait()
            self._close_idle()
            try:
                now = self.clock.now_ms()
                if self.replicas.logs is not None:
                    self.replicas.logs.tick(now)
                # Kafka's isr-expiration task runs every replica.lag.time.max.ms / 2, not on every tick: with tens
                # of thousands of partitions a per-tick walk would take the event loop for itself.
                if self.clock.monotonic_ms() >= next_isr_check:
                    next_isr_check = self.clock.monotonic_ms() + lag_max // 2
                    self.replicas.expire_isr(lag_max)
                await self.groups.tick(now)
                await self.transactions.tick(now)
                await self.isr.tick()
            except (ConnectionLossError, SessionExpiredError) as exc:
                # Expected while cut from ZooKeeper (the next tick tries again): one line per condition per
                # LOG_INTERVAL_MS, no traceback.
                held = noise.check(type(exc).__name__)
                if held is not None:
                    more = f" ({held} more since the last such line)" if held else ""
                    log.warning("broker %d background tick: ZooKeeper unreachable (%s)%s", self.broker_id, exc, more)
            except Exception:
                log.exception("broker %d background tick failed", self.broker_id)
