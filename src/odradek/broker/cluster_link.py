"""A broker's membership in a cluster: its registration, the controller's requests, and admin through znodes.

ZooKeeper-era Kafka in one place, on the broker's side:

* the broker registers the ephemeral ``/brokers/ids/{id}``; its *broker epoch* is that znode's czxid, and it
  re-registers (with a new epoch) after its session expires;
* it runs a :class:`~odradek.controller.Controller`, which takes part in the election and, when elected, drives
  the cluster;
* it applies the controller's LeaderAndIsr, StopReplica and UpdateMetadata, refusing any request from an older
  controller epoch (``STALE_CONTROLLER_EPOCH``), so a zombie controller cannot change anything;
* as a leader it writes ISR changes to the partition state znode with compare-and-set and announces them under
  ``/isr_change_notification`` in batches (5 s quiet, 60 s at most, Kafka's constants);
* topic administration writes Kafka's znodes as AdminZkClient does and waits until the controller's metadata has
  reached this broker (REQUEST_TIMED_OUT otherwise);
* topic config changes arrive through ``/config/changes`` and are applied to the logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from odradek.broker.admin import ADMIN_WAIT_S
from odradek.broker.metadata import BrokerEndpoint, PartitionMeta, TopicMeta
from odradek.broker.topics import INTERNAL_TOPICS, TopicRecord, new_cluster_id
from odradek.controller import Controller, TcpTransport, request_controlled_shutdown
from odradek.controller import requests as creq
from odradek.coordination import (
    Backend,
    BadVersionError,
    EventType,
    NodeExistsError,
    NoNodeError,
    Session,
    SessionState,
    WatchedEvent,
)
from odradek.coordination import znodes as zn
from odradek.errors import ErrorCode, KafkaError
from odradek.tasks import spawn

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

ISR_QUIET_MS = 5_000
ISR_MAX_DELAY_MS = 60_000
CONTROLLED_SHUTDOWN_CALL_S = 30.0  # one ControlledShutdown round trip; retried up to controlled.shutdown.max.retries
# Controller requests are applied in slices of this many partitions, yielding to the event loop in between, so a
# 100,000-partition LeaderAndIsr never holds the loop (and the coordination session's pings) for long. Bigger slices
# finish a big request sooner when other brokers share the loop (`odradek up`); ~0.2 s of work each.
YIELD_EVERY = 1000
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
SHUTDOWN_RETRY_BACKOFF_S = 1.0


class ClusterLink:
    def __init__(self, broker: Broker, backend: Backend) -> None:
        self.broker = broker
        self.backend = backend
        self.session: Session | None = None
        self.broker_epoch = -1
        self.controller_epoch = -1
        self.controller: Controller | None = None
        self.transport = TcpTransport(client_id=f"broker-{broker.broker_id}", gate=broker.resumed)
        self._apply_lock = asyncio.Lock()
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._isr_changes: set[zn.TopicPartition] = set()
        self._isr_first_ms = 0
        self._isr_last_ms = 0
        self._last_config_change = -1
        self._session_lost = asyncio.Event()
        self._keeper: asyncio.Task[None] | None = None
        self._stopping = False
        self.isr_quiet_ms = ISR_QUIET_MS
        self.isr_max_delay_ms = ISR_MAX_DELAY_MS

    # --- session and registration --------------------------------------------------------------------------

    async def connect(self) -> str:
        """Open the session, make Kafka's top-level paths and return the cluster id (creating it first time)."""
        self.session = await self._new_session()
        for path in (zn.BROKER_IDS, zn.TOPICS, zn.DELETE_TOPICS, zn.CONFIG_TOPICS, zn.CONFIG_CHANGES,
                     zn.ISR_CHANGE_NOTIFICATION, zn.BROKER_SEQID):
            await self.session.ensure_path(path)
        try:
            data, _ = await self.session.get(zn.CLUSTER_ID)
            return zn.ClusterId.from_json(data).id
        except NoNodeError:
            candidate = new_cluster_id()
            try:
                await self.session.create(zn.CLUSTER_ID, zn.ClusterId(candidate).to_json(), make_parents=True)
                return candidate
            except NodeExistsError:
                data, _ = await self.session.get(zn.CLUSTER_ID)
                return zn.ClusterId.from_json(data).id

    async def _new_session(self) -> Session:
        timeout = int(self.broker.config["zookeeper.session.timeout.ms"])
        session = await self.backend.session(timeout)
        session.add_listener(self._on_session_state)
        return session

    def _on_session_state(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED and not self._stopping:
            log.warning("broker %d: coordination session expired; registering again", self.broker.broker_id)
            self._session_lost.set()

    async def _current_session(self) -> Session:
        while self.session is None or self.session.state is SessionState.EXPIRED:
            await asyncio.sleep(0.05)
        return self.session

    async def all_topic_configs(self) -> dict[str, dict[str, str]]:
        assert self.session is not None
        names = await self.session.children(zn.CONFIG_TOPICS)
        out: dict[str, dict[str, str]] = {}
        results = await self.session.get_many([zn.topic_config_path(n) for n in names])
        for name, result in zip(names, results, strict=True):
            if isinstance(result, tuple):
                parsed = zn.decode_or_skip(zn.TopicConfig.from_json, result[0], zn.topic_config_path(name))
                if parsed is not None:
                    out[name] = dict(parsed.config)
        return out

    async def start(self) -> None:
        await self._register()
        await self._watch_config_changes()
        self.controller = Controller(
            self.broker.broker_id, self._current_session, self.broker.clock, self.transport,
            self.broker.config.properties(), gate=self.broker.resumed,
        )
        await self.controller.start()
        self._keeper = asyncio.create_task(self._keep_registered(), name=f"broker-{self.broker.broker_id}-session")

    async def _register(self) -> None:
        assert self.session is not None
        b = self.broker
        registration = zn.BrokerRegistration(
            broker_id=b.broker_id,
            endpoints=(zn.Endpoint("PLAINTEXT", b.host, b.port),),
            listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
            rack=b.config.rack,
            timestamp=b.clock.now_ms(),
        )
        path = zn.broker_path(b.broker_id)
        deadline = asyncio.get_running_loop().time() + self.session.timeout_ms / 1000 * 2 + 5
        while True:
            try:
                await self.session.create(path, registration.to_json(), ephemeral=True)
                break
            except NodeExistsError:
                # our previous incarnation's session still holds it until ZooKeeper expires that session
                if asyncio.get_running_loop().time() > deadline:
                    raise KafkaError(ErrorCode.broker_id_not_registered, f"broker id {b.broker_id} is in use") from None
                await asyncio.sleep(0.2)
        stat = await self.session.exists(path)
        assert stat is not None
        self.broker_epoch = stat.czxid
        log.info("broker %d registered at %s (broker epoch %d)", b.broker_id, path, self.broker_epoch)

    async def _keep_registered(self) -> None:
        while not self._stopping:
            await self._session_lost.wait()
            await self.broker.resumed.wait()  # a paused broker notices its lost session when it runs again
            self._session_lost.clear()
            if self._stopping:
                return
            try:
                self.session = await self._new_session()
                await self._register()
                await self._watch_config_changes()
            except Exception:
                log.exception("broker %d could not register again; retrying", self.broker.broker_id)
                await asyncio.sleep(1)
                self._session_lost.set()

    async def stop(self) -> None:
        """Leave the cluster cleanly: closing the session removes our registration at once."""
        await self.abandon()
        if self.session is not None:
            with contextlib.suppress(Exception):
                await self.session.close()

    async def abandon(self) -> None:
        """Stop the controller and the session keeper but leave the session to expire on its own (a crash)."""
        self._stopping = True
        self._session_lost.set()
        if self.controller is not None:
            await self.controller.stop()
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)
        await self.transport.close()

    async def controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships away; retry while any remain."""
        retries = int(self.broker.config["controlled.shutdown.max.retries"])
        for attempt in range(retries + 1):
            controller_id = self.broker.metadata.controller_id
            endpoint = self.broker.metadata.endpoint(controller_id) if controller_id >= 0 else None
            if endpoint is None:
                log.info("controlled shutdown: no controller known (attempt %d)", attempt + 1)
            else:
                try:
                    response = await asyncio.wait_for(
                        request_controlled_shutdown(
                            self.transport, controller_id, zn.Endpoint("PLAINTEXT", *endpoint),
                            self.broker.broker_id, self.broker_epoch,
                        ),
                        CONTROLLED_SHUTDOWN_CALL_S,
                    )
                    if response.error_code == ErrorCode.none and not response.remaining_partitions:
                        log.info("controlled shutdown of broker %d succeeded", self.broker.broker_id)
                        return
                    log.info(
                        "controlled shutdown: %d partitions still led here (error %d)",
                        len(response.remaining_partitions), response.error_code,
                    )
                except Exception as exc:
                    log.info("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
            await asyncio.sleep(SHUTDOWN_RETRY_BACKOFF_S)
        log.warning("controlled shutdown of broker %d did not complete; stopping anyway", self.broker.broker_id)

    # --- requests from the controller ---------------------------------------------------------------------------

    def _check_epochs(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        if controller_epoch < self.controller_epoch:
            return ErrorCode.stale_controller_epoch
        if broker_epoch not in (-1, self.broker_epoch):
            return ErrorCode.stale_broker_epoch
        self.controller_epoch = controller_epoch
        return ErrorCode.none

    # Controller requests apply one at a time (Kafka's replicaStateChangeLock): they yield to the event loop
    # between slices of partitions, and a zombie controller's request must not interleave with its successor's.

    async def leader_and_isr(self, req: creq.LeaderAndIsrRequest) -> creq.LeaderAndIsrResponse:
        async with self._apply_lock:
            return await self._leader_and_isr(req)

    async def stop_replica(self, req: creq.StopReplicaRequest) -> creq.StopReplicaResponse:
        async with self._apply_lock:
            return await self._stop_replica(req)

    async def update_metadata(self, req: creq.UpdateMetadataRequest) -> creq.UpdateMetadataResponse:
        async with self._apply_lock:
            return await self._update_metadata(req)

    async def _leader_and_isr(self, req: creq.LeaderAndIsrRequest) -> creq.LeaderAndIsrResponse:
        error = self._check_epochs(req.controller_epoch, req.broker_epoch)
        if error != ErrorCode.none:
            log.warning("ignoring LeaderAndIsr from controller %d epoch %d: %s", req.controller_id,
                        req.controller_epoch, error.name)
            return creq.LeaderAndIsrResponse(int(error))
        b = self.broker
        for leader in req.live_leaders:
            if leader.broker_id not in b.metadata.brokers:
                b.metadata.set_broker(BrokerEndpoint(leader.broker_id, leader.host_name, leader.port))
        errors: list[creq.PartitionError] = []
        new_topics = {ps.topic for ps in req.partition_states if (ps.topic, ps.partition) not in b.partitions}
        configs = await self._topic_configs(new_topics)
        for n, ps in enumerate(req.partition_states):
            if n and n % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # thousands of partitions: let session pings and clients in between
            code = ErrorCode.none
            part = b.partitions.get((ps.topic, ps.partition))
            if b.broker_id not in ps.replicas:
                code = ErrorCode.unknown_topic_or_partition
            elif part is not None and ps.leader_epoch < part.leader_epoch:
                code = ErrorCode.stale_controller_epoch
            elif part is not None and ps.leader_epoch == part.leader_epoch and part.leader_id == ps.leader:
                part.zk_version = max(part.zk_version, ps.zk_version)
            else:
                try:
                    part = b.open_partition(ps.topic, ps.partition, configs.get(ps.topic))
                    if ps.leader == b.broker_id:
                        b.fetchers.unfollow(ps.topic, ps.partition)
                        part.make_leader(ps.leader_epoch, ps.replicas, ps.isr, ps.zk_version)
                    else:
                        part.make_follower(ps.leader, ps.leader_epoch, ps.replicas, ps.isr)
                        if ps.leader >= 0:
                            b.fetchers.follow(ps.topic, ps.partition, ps.leader, ps.leader_epoch)
                        else:
                            b.fetchers.unfollow(ps.topic, ps.partition)
                    b.on_leadership(part)
                except KafkaError as exc:
                    code = exc.code
            errors.append(creq.PartitionError(ps.topic, ps.partition, int(code)))
        if b.logs is not None:
            b.logs.sync_new_dirs()
        return creq.LeaderAndIsrResponse(0, errors)

    async def _stop_replica(self, req: creq.StopReplicaRequest) -> creq.StopReplicaResponse:
        error = self._check_epochs(req.controller_epoch, req.broker_epoch)
        if error != ErrorCode.none:
            return creq.StopReplicaResponse(int(error))
        b = self.broker
        errors = []
        for n, p in enumerate(req.partitions):
            if n and n % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            code = ErrorCode.none
            try:
                if req.delete_partitions:
                    b.drop_partition(p.topic, p.partition, delete=True)
                else:
                    b.fetchers.unfollow(p.topic, p.partition)
                    part = b.partitions.get((p.topic, p.partition))
                    if part is not None:
                        part.make_follower(-1, part.leader_epoch, part.replicas, part.isr)
                        b.on_leadership(part)
            except KafkaError as exc:
                code = exc.code
            errors.append(creq.PartitionError(p.topic, p.partition, int(code)))
        return creq.StopReplicaResponse(0, errors)

    async def _update_metadata(self, req: creq.UpdateMetadataRequest) -> creq.UpdateMetadataResponse:
        error = self._check_epochs(req.controller_epoch, req.broker_epoch)
        if error != ErrorCode.none:
            return creq.UpdateMetadataResponse(int(error))
        cache = self.broker.metadata
        cache.controller_id = req.controller_id
        live = {}
        for mb in req.live_brokers:
            ep = next((e for e in mb.endpoints if e.listener == "PLAINTEXT"), mb.endpoints[0] if mb.endpoints else None)
            if ep is not None:
                live[mb.id] = BrokerEndpoint(mb.id, ep.host, ep.port, mb.rack)
        if live:
            cache.brokers = live
        by_topic: dict[str, list[creq.UpdateMetadataPartitionState]] = {}
        for ps in req.partition_states:
            by_topic.setdefault(ps.topic, []).append(ps)
        await self._learn_topic_ids([t for t in by_topic if t not in cache.topics])
        applied = 0
        for topic, states in by_topic.items():
            applied += len(states)
            if applied >= YIELD_EVERY:
                applied = 0
                await asyncio.sleep(0)
            meta = cache.topics.get(topic)
            parts = dict(meta.partitions) if meta is not None else {}
            for ps in states:
                if ps.leader == creq.LEADER_DURING_DELETE:
                    parts.pop(ps.partition, None)
                else:
                    parts[ps.partition] = PartitionMeta(
                        ps.partition, ps.leader, ps.leader_epoch, list(ps.replicas), list(ps.isr),
                        list(ps.offline_replicas),
                    )
            if not parts:
                cache.remove_topic(topic)
                self._topic_ids.pop(topic, None)
                # Kafka's coordinators drop a deleted topic's committed offsets (tombstones in __consumer_offsets)
                spawn(self.broker.groups.remove_offsets_for_topics([topic]), f"drop-offsets-{topic}")
                continue
            topic_id = meta.topic_id if meta is not None else self._topic_ids.get(topic) or self._fallback_id(topic)
            cache.set_topic(TopicMeta(topic, topic_id, parts, internal=topic in INTERNAL_TOPICS))
        cache.version += 1
        self.broker.fetchers.resolve_pending()
        return creq.UpdateMetadataResponse(0)

    def _fallback_id(self, topic: str) -> uuid.UUID:
        """A topic created without an id (by an older tool) gets one every broker derives alike."""
        return uuid.uuid5(uuid.NAMESPACE_URL, f"odradek:{self.broker.metadata.cluster_id}:{topic}")

    async def _learn_topic_ids(self, topics: list[str]) -> None:
        missing = [t for t in topics if t not in self._topic_ids]
        if not missing or self.session is None:
            return
        results = await self.session.get_many([zn.topic_path(t) for t in missing])
        for topic, result in zip(missing, results, strict=True):
            if isinstance(result, tuple):
                parsed = zn.decode_or_skip(zn.TopicAssignment.from_json, result[0], zn.topic_path(topic))
                if parsed is not None and parsed.topic_id:
                    with contextlib.suppress(ValueError):
                        self._topic_ids[topic] = uuid.UUID(parsed.topic_id)

    async def _topic_configs(self, topics: set[str]) -> dict[str, dict[str, str]]:
        if not topics or self.session is None:
            return {}
        names = sorted(topics)
        results = await self.session.get_many([zn.topic_config_path(t) for t in names])
        out = {}
        for topic, result in zip(names, results, strict=True):
            if isinstance(result, tuple):
                parsed = zn.decode_or_skip(zn.TopicConfig.from_json, result[0], zn.topic_config_path(topic))
                if parsed is not None:
                    out[topic] = dict(parsed.config)
        return out

    # --- producer ids ---------------------------------------------------------------------------------------

    async def allocate_producer_ids(self, size: int) -> tuple[int, int]:
        """Reserve the next block of producer ids for the whole cluster by compare-and-set on
        ``/latest_producer_id_block`` (Kafka's JSON: inclusive ``block_start``/``block_end`` strings)."""
        assert self.session is not None
        for _attempt in range(100):
            try:
                data, stat = await self.session.get(PRODUCER_ID_BLOCK)
            except NoNodeError:
                doc = {"version": 1, "broker": self.broker.broker_id, "block_start": "0", "block_end": str(size - 1)}
                try:
                    await self.session.create(PRODUCER_ID_BLOCK, json.dumps(doc).encode())
                except NodeExistsError:
                    continue
                return 0, size
            start = int(json.loads(data)["block_end"]) + 1
            doc = {"version": 1, "broker": self.broker.broker_id, "block_start": str(start),
                   "block_end": str(start + size - 1)}
            try:
                await self.session.set(PRODUCER_ID_BLOCK, json.dumps(doc).encode(), expected_version=stat.version)
            except BadVersionError:
                continue
            return start, start + size
        raise KafkaError(ErrorCode.coordinator_not_available, "could not reserve a block of producer ids")

    # --- ISR changes, as the leader --------------------------------------------------------------------------

    async def write_isr(self, part: Any, new_isr: list[int]) -> int | None:
        """Compare-and-set the partition state; on a lost race re-read, and accept only our own write."""
        assert self.session is not None
        path = zn.partition_state_path(part.topic, part.index)
        state = zn.PartitionState(self.broker.broker_id, part.leader_epoch, tuple(new_isr), self.controller_epoch)
        try:
            stat = await self.session.set(path, state.to_json(), expected_version=part.zk_version)
        except BadVersionError:
            data, stat = await self.session.get(path)
            current = zn.decode_or_skip(zn.PartitionState.from_json, data, path)
            if current is None or current.leader != self.broker.broker_id or current.leader_epoch != part.leader_epoch \
                    or list(current.isr) != list(new_isr):
                log.info("ISR update of %s-%d lost a race (zk version %d is stale); the controller has moved on",
                         part.topic, part.index, part.zk_version)
                return None
        except NoNodeError:
            return None
        now = self.broker.clock.monotonic_ms()
        if not self._isr_changes:
            self._isr_first_ms = now
        self._isr_last_ms = now
        self._isr_changes.add(zn.TopicPartition(part.topic, part.index))
        return stat.version

    async def tick(self) -> None:
        if not self._isr_changes or self.session is None:
            return
        now = self.broker.clock.monotonic_ms()
        if now - self._isr_last_ms < self.isr_quiet_ms and now - self._isr_first_ms < self.isr_max_delay_ms:
            return
        changes, self._isr_changes = frozenset(self._isr_changes), set()
        await self.session.create(
            zn.ISR_CHANGE_PREFIX, zn.IsrChangeNotification(changes).to_json(), sequential=True
        )

    # --- topic configs ---------------------------------------------------------------------------------------

    async def _watch_config_changes(self) -> None:
        assert self.session is not None
        session = self.session

        def fired(event: WatchedEvent) -> None:
            # A session event (expiry) is not a change: the keeper watches again once registered anew.
            if event.type is not EventType.SESSION and session is self.session and not self._stopping:
                spawn(self._watch_config_changes(), "config-change-watch")

        names = await session.children(zn.CONFIG_CHANGES, watch=fired)
        for name in sorted(names):
            seq = int(name.rsplit("_", 1)[1])
            if seq <= self._last_config_change:
                continue
            self._last_config_change = seq
            path = f"{zn.CONFIG_CHANGES}/{name}"
            try:
                data, _ = await session.get(path)
            except NoNodeError:
                continue
            note = zn.decode_or_skip(zn.ConfigChangeNotification.from_json, data, path)
            if note is None or not note.entity_path.startswith("topics/"):
                continue
            topic = note.entity_path.split("/", 1)[1]
            configs = await self._topic_configs({topic})
            self.broker.apply_topic_config(topic, configs.get(topic, {}))

    # --- topic administration (TopicAdmin) ---------------------------------------------------------------------

    async def topic_names(self) -> list[str]:
        assert self.session is not None
        return await self.session.children(zn.TOPICS)

    async def topic_record(self, name: str) -> TopicRecord | None:
        assert self.session is not None
        try:
            data, _ = await self.session.get(zn.topic_path(name))
        except NoNodeError:
            return None
        assignment = zn.decode_or_skip(zn.TopicAssignment.from_json, data, zn.topic_path(name))
        if assignment is None:
            return None
        configs = await self._topic_configs({name})
        topic_id = uuid.UUID(assignment.topic_id) if assignment.topic_id else self._fallback_id(name)
        return TopicRecord(name, topic_id, {p: list(r) for p, r in assignment.partitions.items()},
                           configs.get(name, {}))

    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str],
                           wait_s: float = ADMIN_WAIT_S) -> TopicRecord:
        assert self.session is not None
        topic_id = uuid.uuid4()
        if await self.session.exists(zn.topic_path(name)):
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        await self._write_topic_config(name, configs)
        try:
            await self.session.create(
                zn.topic_path(name),
                zn.TopicAssignment({p: tuple(r) for p, r in assignment.items()}, topic_id=str(topic_id)).to_json(),
            )
        except NodeExistsError:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.") from None
        self._topic_ids[name] = topic_id
        log.info("created topic %s with %d partitions, configs %s", name, len(assignment), configs or "{}")
        await self._await_metadata(
            lambda: (m := self.broker.metadata.topics.get(name)) is not None
            and len(m.partitions) == len(assignment) and all(p.leader >= 0 for p in m.partitions.values()),
            f"topic {name} to get leaders", wait_s,
        )
        return TopicRecord(name, topic_id, assignment, dict(configs))

    async def delete_topic(self, name: str, wait_s: float = ADMIN_WAIT_S) -> None:
        assert self.session is not None
        if not self.broker.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        if not await self.session.exists(zn.topic_path(name)):
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        with contextlib.suppress(NodeExistsError):
            await self.session.create(zn.delete_topic_path(name), b"", make_parents=True)
        log.info("topic %s marked for deletion", name)
        await self._await_metadata(lambda: name not in self.broker.metadata.topics, f"topic {name} to be deleted",
                                   wait_s)

    async def add_partitions(self, name: str, new_assignment: dict[int, list[int]],
                             wait_s: float = ADMIN_WAIT_S) -> None:
        assert self.session is not None
        path = zn.topic_path(name)
        data, stat = await self.session.get(path)
        current = zn.TopicAssignment.from_json(data, path)
        merged = dict(current.partitions)
        merged.update({p: tuple(r) for p, r in new_assignment.items()})
        updated = zn.TopicAssignment(merged, current.adding_replicas, current.removing_replicas, current.topic_id)
        try:
            await self.session.set(path, updated.to_json(), expected_version=stat.version)
        except BadVersionError:
            raise KafkaError(ErrorCode.reassignment_in_progress, f"topic {name} changed concurrently") from None
        total = len(merged)
        await self._await_metadata(
            lambda: (m := self.broker.metadata.topics.get(name)) is not None and len(m.partitions) == total,
            f"topic {name} to reach {total} partitions", wait_s,
        )

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        assert self.session is not None
        await self._write_topic_config(name, configs)
        await self.session.create(
            zn.CONFIG_CHANGE_PREFIX, zn.ConfigChangeNotification(f"topics/{name}").to_json(), sequential=True
        )

    async def _write_topic_config(self, name: str, configs: dict[str, str]) -> None:
        assert self.session is not None
        path = zn.topic_config_path(name)
        data = zn.TopicConfig(configs).to_json()
        try:
            await self.session.create(path, data, make_parents=True)
        except NodeExistsError:
            await self.session.set(path, data)

    async def _await_metadata(self, done: Any, what: str, wait_s: float) -> None:
        """Kafka's admin requests answer once the change reached the metadata, REQUEST_TIMED_OUT after their
        timeout (the change itself stands), and at once when the timeout is 0 or less."""
        if wait_s <= 0:
            return
        if not await self.broker.metadata.wait_until(done, wait_s):
            raise KafkaError(ErrorCode.request_timed_out, f"timed out waiting for {what}")
