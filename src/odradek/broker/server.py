"""The broker: its listener, its partitions and logs, its metadata cache, its group coordinator.

Everything runs on one asyncio event loop. A :class:`Broker` is constructed with its configuration and an
injected clock, started with :meth:`Broker.start` and stopped with :meth:`Broker.stop`, which flushes logs and
writes checkpoints. Several brokers can share one process (``odradek up --brokers N``); nothing here is global.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from odradek import heap
from odradek.broker import apis as apis_pkg
from odradek.broker.admin import ADMIN_WAIT_S, StandaloneAdmin, TopicAdmin
from odradek.broker.cluster_link import ClusterLink
from odradek.broker.config import BrokerConfig
from odradek.broker.fetcher import FetcherManager
from odradek.broker.group import GroupConfig, GroupCoordinator
from odradek.broker.log import LogManager
from odradek.broker.metadata import BrokerEndpoint, MetadataCache
from odradek.broker.producer_ids import ProducerIdManager
from odradek.broker.replica import Partition
from odradek.broker.topic_config import validate_overrides
from odradek.broker.topics import TopicRecord, collision_key, validate_topic_name
from odradek.clock import Clock, SystemClock
from odradek.coordination import Backend
from odradek.errors import ErrorCode, KafkaError
from odradek.placement import BrokerMetadata, assign_replicas_to_brokers
from odradek.protocol.records import BatchHeader, Record, decode_batch, iter_batches, validate_produce

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
TICK_INTERVAL_S = 0.1
LOOP_STALL_WARN_S = 1.0
MAX_PARTITIONS_PER_REQUEST = 100_000  # a bound so one request cannot exhaust memory; Kafka has none


def load_apis() -> dict[int, ModuleType]:
    """Every module in ``broker/apis`` is one API; the registry is what is there, never a hand-kept list."""
    found: dict[int, ModuleType] = {}
    for info in pkgutil.iter_modules(apis_pkg.__path__):
        module = importlib.import_module(f"{apis_pkg.__name__}.{info.name}")
        key = getattr(module, "API_KEY", None)
        if key is None:
            continue
        if key in found:
            raise RuntimeError(f"API key {key} served by both {found[key].__name__} and {module.__name__}")
        found[key] = module
    return found


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock | None = None, backend: Backend | None = None) -> None:
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.broker_id = config.broker_id
        self.data_dir = Path(config.data_dir)
        self.apis = load_apis()
        self.metadata = MetadataCache(cluster_id="")
        self.logs: LogManager | None = None
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.producer_ids = ProducerIdManager(self.data_dir / "producer-ids.json")
        self.fetchers = FetcherManager(self)
        self.groups = GroupCoordinator(
            broker_id=self.broker_id,
            clock=self.clock,
            offsets_log=_OffsetsLog(self),
            config=GroupConfig.from_overrides({k: str(v) for k, v in config.values.items()}),
        )
        self.backend = backend
        self.link: ClusterLink | None = None
        # Cleared while paused (fault injection): requests, fetchers, background ticks, the controller and its
        # sends all wait on it, as the threads of a SIGSTOPped Kafka process would.
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.admin: TopicAdmin
        self._standalone: StandaloneAdmin | None = None
        if backend is None:
            self._standalone = StandaloneAdmin(self)
            self.admin = self._standalone
        else:
            self.link = ClusterLink(self, backend)
            self.admin = self.link
            self.producer_ids.allocate = self.link.allocate_producer_ids
        self._server: asyncio.base_events.Server | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self.host = config.host
        self.port = config.port
        self.running = False
        self.stopping = False
        self.isolated = False
        self.serving = asyncio.Event()  # set once start-up is complete; requests wait for it, as Kafka's do

    # --- lifecycle -------------------------------------------------------------------------------------------

    async def start(self) -> None:
        heap.tune()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.producer_ids.load()
        self._server = await asyncio.start_server(self._accept, self.config.host, self.config.port, limit=1 << 20)
        self.port = self._server.sockets[0].getsockname()[1]
        self.metadata.set_broker(BrokerEndpoint(self.broker_id, self.config.host, self.port, self.config.rack))
        if self._standalone is not None:
            cluster_id = self._standalone.load()
            self.metadata.controller_id = self.broker_id
            overrides = {name: t.configs for name, t in self._standalone.store.topics.items()}
        else:
            assert self.link is not None
            cluster_id = await self.link.connect()
            overrides = await self.link.all_topic_configs()
        self.metadata.cluster_id = cluster_id
        self.logs = LogManager(
            self.data_dir, self.clock, self.config.topic_defaults(), broker_id=self.broker_id, cluster_id=cluster_id,
            retention_check_interval_ms=self.config["log.retention.check.interval.ms"],
        )
        # On a thread: recovering thousands of logs takes seconds, and the event loop must keep the coordination
        # session alive meanwhile (a blocked loop misses its pings and the session expires mid start-up).
        await asyncio.to_thread(self.logs.load, overrides)
        if self._standalone is not None:
            self._standalone.open_all()
        else:
            assert self.link is not None
            await self.link.start()
        self._tick_task = asyncio.create_task(self._tick_loop(), name=f"broker-{self.broker_id}-tick")
        self.running = True
        self.serving.set()
        log.info("broker %d listening on %s:%d (data dir %s)", self.broker_id, self.host, self.port, self.data_dir)

    async def stop(self, controlled: bool = True) -> None:
        """Stop serving; in a cluster first hand leaderships away (controlled shutdown) when ``controlled``."""
        if self.link is not None and controlled and self.config["controlled.shutdown.enable"]:
            await self.link.controlled_shutdown()
        self.stopping = True
        self.running = False
        if self._server is not None:
            self._server.close()
        await self._close_connections()
        if self._tick_task is not None:
            self._tick_task.cancel()
            await asyncio.gather(self._tick_task, return_exceptions=True)
        await self.fetchers.stop()
        if self.link is not None:
            await self.link.stop()
        await self.groups.shutdown()
        for p in self.partitions.values():
            p.fail_waiters()
        if self.logs is not None:
            # On a thread, as loading is: flushing and snapshotting 10,000 logs takes seconds, and in
            # `odradek up` the other brokers share this event loop (nothing else touches these logs any more).
            await asyncio.to_thread(self.logs.close)
        log.info("broker %d stopped", self.broker_id)

    async def crash(self) -> None:
        """Stop as a killed process stops: nothing flushed, checkpointed or handed over (fault injection)."""
        self.stopping = True
        self.running = False
        if self._server is not None:
            self._server.close()
        if self._tick_task is not None:
            self._tick_task.cancel()
        await self._close_connections()
        await self.fetchers.stop()
        if self.link is not None:
            await self.link.abandon()
        await self.groups.shutdown()
        for p in self.partitions.values():
            p.fail_waiters()
        if self.logs is not None:
            self.logs.abandon()
        log.warning("broker %d crashed (fault injection)", self.broker_id)

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

    def pause(self) -> None:
        """Fault injection: stop doing anything (connections stay open, nothing is answered) until resumed."""
        self.resumed.clear()
        log.warning("broker %d paused (fault injection)", self.broker_id)

    def resume(self) -> None:
        self.resumed.set()
        log.warning("broker %d resumed", self.broker_id)

    def set_isolated(self, isolated: bool) -> None:
        """Fault injection: drop every connection in and out while isolated, as a network partition would."""
        self.isolated = isolated
        if isolated:
            for writer in list(self._writers):
                writer.close()
            for fetcher in self.fetchers.fetchers.values():
                fetcher.peer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from odradek.broker.connection import Connection

        if self.isolated:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self._writers.add(writer)
        try:
            await Connection(self, reader, writer).serve()
        finally:
            self._connections.discard(task)
            self._writers.discard(writer)

    async def _tick_loop(self) -> None:
        lag_max = self.config["replica.lag.time.max.ms"]
        next_isr_check = 0
        loop = asyncio.get_running_loop()
        while True:
            asleep = loop.time()
            await asyncio.sleep(TICK_INTERVAL_S)
            late = loop.time() - asleep - TICK_INTERVAL_S
            if late > LOOP_STALL_WARN_S:
                # Everything on this loop (client requests, fetchers, the coordination session's pings) waited
                # this long: the first thing to look at when a session expires under load.
                log.warning("broker %d: event loop stalled for %.1f s", self.broker_id, late)
            await self.resumed.wait()
            try:
                now = self.clock.now_ms()
                assert self.logs is not None
                self.logs.tick(now)
                # Kafka's isr-expiration task runs every replica.lag.time.max.ms / 2, not on every tick: with tens
                # of thousands of partitions a per-tick walk would take the event loop for itself.
                if self.clock.monotonic_ms() >= next_isr_check:
                    next_isr_check = self.clock.monotonic_ms() + lag_max // 2
                    for part in self.partitions.values():
                        if part.is_leader and len(part.replicas) > 1:
                            part.maybe_shrink_isr(lag_max)
                await self.groups.tick(now)
                if self.link is not None:
                    await self.link.tick()
            except Exception:
                log.exception("broker %d background tick failed", self.broker_id)

    # --- partitions ------------------------------------------------------------------------------------------

    def open_partition(self, topic: str, index: int, overrides: dict[str, str] | None = None) -> Partition:
        assert self.logs is not None
        plog = self.logs.get_or_create(topic, index, overrides)
        part = self.partitions.get((topic, index))
        if part is None:
            part = Partition(topic, index, plog, self.broker_id, self.clock)
            self.partitions[(topic, index)] = part
        if self.link is not None:
            part.isr_writer = self.link.write_isr
        return part

    def drop_partition(self, topic: str, index: int, delete: bool) -> None:
        self.fetchers.unfollow(topic, index)
        part = self.partitions.pop((topic, index), None)
        if part is not None:
            part.fail_waiters()
        if topic == OFFSETS_TOPIC:
            self.groups.unload_partition(index)
        if delete:
            assert self.logs is not None
            self.logs.delete_partition(topic, index)

    def on_leadership(self, part: Partition) -> None:
        """Internal topics follow their leaders: this broker coordinates the groups of the partitions it leads."""
        if part.topic == OFFSETS_TOPIC:
            if part.is_leader:
                self.groups.load_partition(part.index)
            else:
                self.groups.unload_partition(part.index)

    def apply_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        assert self.logs is not None
        self.logs.update_config(topic, configs)
        for (t, _i), part in self.partitions.items():
            if t == topic:
                part.min_isr = max(1, min(int(part.log.config.min_insync_replicas), len(part.replicas) or 1))

    def partition(self, topic: str, index: int) -> Partition:
        """The local replica; a partition the cluster has but this broker does not host is NOT_LEADER_OR_FOLLOWER.

        As Kafka's ReplicaManager answers: UNKNOWN_TOPIC_OR_PARTITION would tell a client the partition does not
        exist, while it only lives elsewhere (or this broker has just restarted and not yet been told).
        """
        part = self.partitions.get((topic, index))
        if part is None:
            meta = self.metadata.topics.get(topic)
            if meta is not None and index in meta.partitions:
                raise KafkaError(ErrorCode.not_leader_or_follower)
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        return part

    def leader_partition(self, topic: str, index: int, leader_epoch: int = -1) -> Partition:
        part = self.partition(topic, index)
        part.check_leader(leader_epoch)
        return part

    def live_broker_ids(self) -> list[int]:
        return sorted(self.metadata.brokers)

    # --- topic administration --------------------------------------------------------------------------------

    async def check_new_topic(
        self, name: str, num_partitions: int, replication_factor: int,
        assignment: dict[int, list[int]] | None, configs: dict[str, str],
    ) -> dict[int, list[int]]:
        """Kafka's CreateTopics validation, in Kafka's order and with its codes; returns the assignment to use."""
        validate_topic_name(name)
        existing = await self.admin.topic_names()
        if name in existing:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        for other in existing:
            if collision_key(other) == collision_key(name):
                raise KafkaError(
                    ErrorCode.invalid_topic_exception, f"Topic '{name}' collides with existing topic: {other}"
                )
        validate_overrides(configs)
        brokers = self.live_broker_ids()
        if assignment:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            if sorted(assignment) != list(range(len(assignment))):
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment, "partitions should be a consecutive 0-based integer sequence"
                )
            for replicas in assignment.values():
                if not replicas or len(set(replicas)) != len(replicas):
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment, f"Duplicate replica assignment found: {replicas}"
                    )
                for r in replicas:
                    if r not in brokers:
                        raise KafkaError(ErrorCode.invalid_replica_assignment, f"Unknown broker {r} in assignment")
            return assignment
        partitions = self.config["num.partitions"] if num_partitions == -1 else num_partitions
        rf = self.config["default.replication.factor"] if replication_factor == -1 else replication_factor
        if partitions <= 0:
            raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        if partitions > MAX_PARTITIONS_PER_REQUEST:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"Number of partitions {partitions} exceeds the {MAX_PARTITIONS_PER_REQUEST} one request may create.",
            )
        if rf <= 0:
            raise KafkaError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
        if rf > len(brokers):
            raise KafkaError(
                ErrorCode.invalid_replication_factor,
                f"Replication factor: {rf} larger than available brokers: {len(brokers)}.",
            )
        return self._place(partitions, rf, brokers)

    def _place(self, partitions: int, rf: int, brokers: list[int], start_partition_id: int = -1,
               fixed_start_index: int = -1) -> dict[int, list[int]]:
        racks = {b: self.metadata.brokers[b].rack for b in brokers}
        metas = [BrokerMetadata(b, racks[b] if all(racks.values()) else None) for b in brokers]
        placed = assign_replicas_to_brokers(
            partitions, rf, metas, fixed_start_index=fixed_start_index, start_partition_id=start_partition_id
        )
        return {p: list(r) for p, r in placed.items()}

    def assign_new_partitions(
        self, existing: dict[int, list[int]], count: int, manual: Any | None
    ) -> dict[int, list[int]]:
        current = len(existing)
        rf = len(existing[0])
        brokers = self.live_broker_ids()
        if manual:
            if len(manual) != count - current:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"Increasing the number of partitions by {count - current} but {len(manual)} assignments provided.",
                )
            out: dict[int, list[int]] = {}
            for i, a in enumerate(manual):
                replicas = list(a.broker_ids)
                unknown = [b for b in replicas if b not in brokers]
                if unknown or len(set(replicas)) != len(replicas) or len(replicas) != rf:
                    raise KafkaError(ErrorCode.invalid_replica_assignment, f"Invalid assignment {replicas}")
                out[current + i] = replicas
            return out
        if count - current > MAX_PARTITIONS_PER_REQUEST:
            raise KafkaError(
                ErrorCode.invalid_partitions, f"Cannot add more than {MAX_PARTITIONS_PER_REQUEST} partitions"
            )
        if rf > len(brokers):
            raise KafkaError(
                ErrorCode.invalid_replication_factor,
                f"Replication factor: {rf} larger than available brokers: {len(brokers)}.",
            )
        first = existing[0][0]
        start = brokers.index(first) if first in brokers else -1
        return self._place(count - current, rf, brokers, start_partition_id=current, fixed_start_index=start)

    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str],
                           wait_s: float = ADMIN_WAIT_S) -> TopicRecord:
        return await self.admin.create_topic(name, assignment, configs, wait_s)

    async def delete_topic(self, name: str, wait_s: float = ADMIN_WAIT_S) -> None:
        await self.admin.delete_topic(name, wait_s)

    async def ensure_offsets_topic(self) -> None:
        if OFFSETS_TOPIC in await self.admin.topic_names():
            return
        n = self.config["offsets.topic.num.partitions"]
        live = self.live_broker_ids()
        rf = min(self.config["offsets.topic.replication.factor"], len(live))
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
        }
        try:
            await self.create_topic(OFFSETS_TOPIC, self._place(n, rf, live), configs)
        except KafkaError as exc:
            if exc.code != ErrorCode.topic_already_exists:
                raise

    # --- the data path ---------------------------------------------------------------------------------------

    def append_records(self, topic: str, index: int, records: bytes | bytearray | memoryview) -> tuple[Any, Partition]:
        """Validate and append a Produce request's record set as leader; the caller decides how long to wait."""
        part = self.leader_partition(topic, index)
        buf = records if isinstance(records, bytearray) else bytearray(records)
        max_bytes = part.log.config.max_message_bytes
        headers = validate_produce(buf)
        for h in headers:
            if h.size > max_bytes:
                raise KafkaError(ErrorCode.message_too_large, f"batch of {h.size} bytes exceeds max.message.bytes")
        return part.append_as_leader(buf, headers, self.clock.now_ms()), part


class _OffsetsLog:
    """The group coordinator's window onto ``__consumer_offsets``: append as leader, wait until committed."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def append(self, partition: int, batch: bytearray) -> None:
        broker = self.broker
        part = broker.leader_partition(OFFSETS_TOPIC, partition)
        headers = [h for _pos, h in iter_batches(batch)]
        result = part.append_as_leader(batch, headers, broker.clock.now_ms())
        timeout_s = broker.config["offsets.commit.timeout.ms"] / 1000
        if not await part.wait_for_hw(result.last_offset + 1, timeout_s):
            raise KafkaError(ErrorCode.request_timed_out, "offset commit was not replicated in time")

    def read(self, partition: int) -> Iterator[tuple[BatchHeader, list[Record]]]:
        plog = self.broker.partition(OFFSETS_TOPIC, partition).log
        offset = plog.log_start_offset
        end = plog.log_end_offset  # as Kafka's loader: to the log end, so a new leader keeps every commit it has
        while offset < end:
            chunk = plog.read(offset, 1 << 20, max_offset=end, min_one=True)
            if not chunk.size:
                return
            buf = b"".join(chunk.buffers)
            for position, header in iter_batches(buf):
                yield decode_batch(buf, position)
                offset = header.next_offset
