"""The broker: the composition root of its parts, its listener, and its lifecycle.

Every broker is a member of a cluster, a cluster of one included: it registers in the coordination store, runs the
seeds' controller (one broker's is active), and hosts the replicas the controller assigns it. The parts, each in a
module of its own and each given only what it works with:

* :class:`~odradek.broker.replica_manager.ReplicaManager`: partitions, logs and follower fetchers;
* :mod:`odradek.broker.link`: membership, the controller's requests, ISR propagation, producer-id blocks, the
  config-change watch, topic administration, controlled shutdown;
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
import logging
from pathlib import Path

from odradek import heap
from odradek.broker.api_registry import load_apis
from odradek.broker.config import BrokerConfig
from odradek.broker.connection import Connection
from odradek.broker.faults import FaultState
from odradek.broker.fetch_sessions import FetchSessionCache
from odradek.broker.fetcher import FetchSettings
from odradek.broker.group import GroupConfig, GroupCoordinator
from odradek.broker.group.config import OFFSETS_TOPIC
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
from odradek.broker.replica import Partition
from odradek.broker.replica_manager import OffsetsTopicLog, ReplicaManager
from odradek.broker.services import Services
from odradek.broker.stats import BrokerStats
from odradek.broker.txn.config import TxnConfig
from odradek.broker.txn.service import Transactions
from odradek.clock import Clock, SystemClock
from odradek.controller import Controller, TcpTransport
from odradek.coordination import Backend
from odradek.coordination import znodes as zn
from odradek.coordination.store import ConnectionLossError, SessionExpiredError
from odradek.log_limit import LogLimiter
from odradek.observe.http import ObserveServer
from odradek.observe.metrics import make_registry
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
        self.host = config.host
        self.port = config.port
        self.faults = FaultState()
        self.metadata = MetadataCache(cluster_id="")
        self.replicas = ReplicaManager(
            self.broker_id, self.clock, self.metadata,
            FetchSettings(config["replica.fetch.max.bytes"], config["replica.fetch.wait.max.ms"]), self.faults,
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
        producer_ids = ProducerIdManager(ProducerIdBlocks(self.membership).allocate)
        self.transactions = Transactions(
            self.broker_id, self.clock, self.metadata, self.replicas, self.groups,
            TxnConfig.from_values(config.values), producer_ids.next_id, self.faults,
        )
        self.replicas.listeners.append(self.transactions)
        self.controller_requests = ControllerRequests(self.membership, self.replicas, self.metadata,
                                                      self._drop_offsets_of)
        self.isr = IsrPropagation(self.membership, self.clock, lambda: self.controller_requests.controller_epoch)
        self.replicas.isr_writer = self._write_isr
        self.config_watch = ConfigWatch(self.membership, self.replicas.apply_topic_config)
        self.transport = TcpTransport(client_id=f"broker-{self.broker_id}", gate=self.faults.resumed)
        self.controller = Controller(self.broker_id, self.membership.current_session, self.clock, self.transport,
                                     config.properties(), gate=self.faults.resumed)
        self.topics = TopicAdmin(self.membership, self.metadata, config)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"], self.clock)
        self.services = Services(
            broker_id=self.broker_id, config=config, metadata=self.metadata,
            replicas=self.replicas, topics=self.topics, groups=self.groups, transactions=self.transactions,
            producer_ids=producer_ids,
            controller=self.controller, controller_requests=self.controller_requests, apis=load_apis(),
            stats=self.replicas.stats,
            fetch_sessions=self.fetch_sessions,
        )
        self.metrics_port = metrics_port
        self.http: ObserveServer | None = None
        self._server: asyncio.base_events.Server | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.running = False
        self.stopping = False
        # set when the broker stopped itself (every log directory failed); its process should exit, as Kafka's halts
        self.halted = asyncio.Event()
        self.serving = asyncio.Event()  # set once start-up is complete; requests wait for it, as Kafka's do

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

    def _drop_offsets_of(self, topic: str) -> None:
        # Kafka's coordinators drop a deleted topic's committed offsets (tombstones in __consumer_offsets)
        spawn(self.groups.remove_offsets_for_topics([topic]), f"drop-offsets-{topic}")

    # --- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        heap.tune()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._server = await asyncio.start_server(self._accept, self.config.host, self.config.port, limit=1 << 20)
        self.port = self._server.sockets[0].getsockname()[1]
        self.metadata.set_broker(BrokerEndpoint(self.broker_id, self.config.host, self.port, self.config.rack))
        http_port = -1
        if self.metrics_port is not None:
            self.http = ObserveServer(self, make_registry(self, self.services.apis))
            http_port = self.metrics_port = await self.http.start(self.config.host, self.metrics_port)
        self.metadata.cluster_id = await self.membership.connect()
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
        loop = asyncio.get_running_loop()

        def dir_failed(directory: Path) -> None:  # on whichever thread hit the disk error
            loop.call_soon_threadsafe(self._log_dir_failed, logs, directory)

        logs.on_dir_failure.append(dir_failed)
        await self.membership.register(Registration(self.broker_id, self.host, self.port, self.config.rack,
                                                    http_port))
        await self.controller.start()
        self._tick_task = asyncio.create_task(self._tick_loop(), name=f"broker-{self.broker_id}-tick")
        self.running = True
        self.serving.set()
        log.info("broker %d listening on %s:%d (log dirs %s)", self.broker_id, self.host, self.port,
                 ",".join(self.config.log_dirs))

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
        if self._server is not None:
            self._server.close()
        if self.http is not None:
            await self.http.stop()
        if self._tick_task is not None:
            self._tick_task.cancel()
            await asyncio.gather(self._tick_task, return_exceptions=True)
        await self._close_connections()
        await self.replicas.fetchers.stop()
        self.config_watch.stopped = True
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

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.faults.isolated:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        try:
            await Connection(self.services, self, reader, writer).serve()
        finally:
            self._connections.discard(task)
            self._writers.discard(writer)

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
