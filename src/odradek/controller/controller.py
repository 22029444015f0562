"""The Kafka controller of the ZooKeeper era (seed 001), on one asyncio event queue.

Every broker runs a :class:`Controller`; the one that creates the ephemeral ``/controller`` znode and bumps
``/controller_epoch`` is active. Watches, API calls, channel responses, timers and session expiry only *post events*;
one task takes them off the queue and handles each to the end before the next (as Kafka has done since 1.1), so
the context, the state machines and the request batch are touched by nothing else and need no locks. The decisions
themselves are pure functions (:mod:`.election`, :mod:`.states`, :mod:`.batch`); this module sequences them and
does the I/O: reads and fenced writes through :class:`~odradek.controller.zkstore.ControllerStore`, requests
through the per-broker channels.

Resignation (session expired, ``/controller`` taken by another broker, a fenced write refused) stops the channels
and the rebalance timer, forgets the context, and bumps a generation number that turns every watch armed while
active into a no-op; the coordination session API has no ``removeWatches``, so stale watches are disarmed by
ignoring them when they fire.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from odradek.clock import Clock
from odradek.controller.batch import RequestBatch
from odradek.controller.channels import ChannelManager, Transport
from odradek.controller.context import (
    ControllerContext,
    LeaderIsr,
    PartitionReplica,
    ReplicaAssignment,
    TopicPartition,
)
from odradek.controller.election import (
    Elected,
    Election,
    NotElected,
    elect_leader,
    needs_unclean_config,
    without_replica,
)
from odradek.controller.requests import STOP_REPLICA, StopReplicaRequest, StopReplicaResponse
from odradek.controller.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    PartitionState,
    ReplicaState,
    StateTable,
    state_change_log,
)
from odradek.controller.zkstore import ControllerMovedError, ControllerStore
from odradek.coordination.store import (
    BadVersionError,
    ConnectionLossError,
    CoordinationError,
    EventType,
    NodeExistsError,
    Session,
    SessionExpiredError,
    SessionState,
    WatchedEvent,
)
from odradek.coordination.znodes import (
    PREFERRED_REPLICA_ELECTION,
    BrokerRegistration,
    Endpoint,
    TopicAssignment,
    ensure_kafka_layout,
)
from odradek.errors import ErrorCode, KafkaError
from odradek.placement import imbalanced_brokers

__all__ = ["PREFERRED", "UNCLEAN", "Controller", "PartitionResult", "ReassignmentState"]

log = logging.getLogger(__name__)

PREFERRED = 0
"""ElectLeaders ``election_type`` values, as in Kafka's ``ElectionType``."""
UNCLEAN = 1

P = PartitionState
R = ReplicaState
T = TypeVar("T")

SessionSource = Session | Callable[[], Awaitable[Session]]


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """One partition's answer to ElectLeaders or AlterPartitionReassignments: a Kafka error code and message."""

    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ReassignmentState:
    """ListPartitionReassignments' answer for one partition."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


# --------------------------------------------------------------------------------------------- events


@dataclass(slots=True)
class _Event:
    pass


@dataclass(slots=True)
class _Startup(_Event):
    pass


@dataclass(slots=True)
class _ControllerChange(_Event):
    pass


@dataclass(slots=True)
class _Expire(_Event):
    pass


@dataclass(slots=True)
class _BrokerChange(_Event):
    pass


@dataclass(slots=True)
class _TopicChange(_Event):
    pass


@dataclass(slots=True)
class _PartitionModifications(_Event):
    topic: str


@dataclass(slots=True)
class _TopicDeletion(_Event):
    pass


@dataclass(slots=True)
class _ReassignmentZnode(_Event):
    pass


@dataclass(slots=True)
class _ReassignmentIsrChange(_Event):
    tp: TopicPartition


@dataclass(slots=True)
class _IsrChangeNotification(_Event):
    pass


@dataclass(slots=True)
class _PreferredZnode(_Event):
    pass


@dataclass(slots=True)
class _AutoRebalance(_Event):
    pass


@dataclass(slots=True)
class _EpochCheck(_Event):
    """A broker answered STALE_CONTROLLER_EPOCH: somebody newer may be controller."""


@dataclass(slots=True)
class _StopReplicaDone(_Event):
    broker: int
    response: StopReplicaResponse
    partitions: list[TopicPartition]


@dataclass(slots=True)
class _ApiCall(_Event):
    call: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]
    needs_active: bool = True


@dataclass(slots=True)
class _Retry(_Event):
    event: _Event = field(default_factory=_Event)


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


# ------------------------------------------------------------------------------------------ controller


class Controller:
    """One broker's controller; see the package docstring for the public surface."""

    def __init__(
        self,
        broker_id: int,
        session: SessionSource,
        clock: Clock,
        transport: Transport,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._session_source = session
        self._clock = clock
        self._transport = transport
        cfg = dict(config or {})
        self._unclean_default = _flag(cfg.get("unclean.leader.election.enable", False))
        self._delete_enabled = _flag(cfg.get("delete.topic.enable", True))
        self._auto_rebalance = _flag(cfg.get("auto.leader.rebalance.enable", True))
        self._imbalance_pct = int(cfg.get("leader.imbalance.per.broker.percentage", 10))
        self._check_interval_s = float(cfg.get("leader.imbalance.check.interval.seconds", 300))
        self._request_timeout_ms = int(cfg.get("controller.socket.timeout.ms", 30_000))
        self._retry_backoff_ms = int(cfg.get("retry.backoff.ms", 100))
        self._listener = str(cfg.get("inter.broker.listener.name", "PLAINTEXT"))

        self._session: Session | None = None
        self._store: ControllerStore | None = None
        self._queue: asyncio.Queue[_Event] = asyncio.Queue()
        self._loop_task: asyncio.Task[None] | None = None
        self._timer_tasks: set[asyncio.Task[None]] = set()
        self._stopped = False

        self._active = False
        self._active_id: int | None = None
        self._generation = 0
        self._watchers: dict[object, Callable[[WatchedEvent], None]] = {}
        self.ctx = ControllerContext()
        self.partition_states: StateTable[TopicPartition, PartitionState] = StateTable(
            "Partition", PARTITION_VALID_PREVIOUS, P.NON_EXISTENT)
        self.replica_states: StateTable[PartitionReplica, ReplicaState] = StateTable(
            "Replica", REPLICA_VALID_PREVIOUS, R.NON_EXISTENT)
        self._channels: ChannelManager | None = None
        self._batch = RequestBatch()
        self.events_processed = 0

    # ------------------------------------------------------------------------------- public surface

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def epoch(self) -> int:
        """The controller epoch this broker holds while active (0 when it is not the controller)."""
        return self.ctx.epoch if self._active else 0

    @property
    def active_controller_id(self) -> int | None:
        """Who this broker last saw in ``/controller``."""
        return self._active_id

    async def start(self) -> None:
        """Open (or adopt) the session, start the event loop and join the election."""
        self._stopped = False
        await self._attach_session()
        self._loop_task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-{self.broker_id}")
        self._post(_Startup())

    async def stop(self) -> None:
        """Resign if active (deleting ``/controller`` so another broker takes over at once) and stop."""
        self._stopped = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.wait({self._loop_task})
            self._loop_task = None
        was_active = self._active
        await self._resign()
        if was_active and self._store is not None:
            with contextlib.suppress(CoordinationError):
                await self._store.delete_controller_if_mine(self.broker_id)
        self._fail_pending(KafkaError(ErrorCode.not_controller, "controller stopped"))
        if self._session is not None:
            self._session.remove_listener(self._on_session_state)

    async def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None, election_type: int = PREFERRED
    ) -> dict[TopicPartition, PartitionResult]:
        """ElectLeaders: preferred (0) or unclean (1) election; ``None`` means every partition."""
        wanted = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        return await self._call(lambda: self._elect_leaders(wanted, election_type))

    async def alter_partition_reassignments(
        self, reassignments: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[TopicPartition, PartitionResult]:
        """AlterPartitionReassignments: target replicas per partition, ``None`` to cancel one in progress."""
        wanted = {TopicPartition(t, p): (None if r is None else tuple(r)) for (t, p), r in reassignments.items()}
        return await self._call(lambda: self._alter_reassignments(wanted))

    async def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[TopicPartition, ReassignmentState]:
        wanted = None if partitions is None else {TopicPartition(t, p) for t, p in partitions}

        async def listing() -> dict[TopicPartition, ReassignmentState]:
            out = {}
            for tp in sorted(self.ctx.being_reassigned):
                if wanted is not None and tp not in wanted:
                    continue
                ra = self.ctx.assignments.get(tp)
                if ra is not None:
                    out[tp] = ReassignmentState(ra.replicas, ra.adding, ra.removing)
            return out

        return await self._call(listing)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int = -1) -> set[TopicPartition]:
        """Move ``broker_id``'s leaderships away and shrink it out of ISRs; returns the partitions it still
        leads (the broker retries until this is empty or its timeout passes)."""
        return await self._call(lambda: self._controlled_shutdown(broker_id, broker_epoch))

    async def wait_idle(self) -> None:
        """Until the event queue is empty and every channel has sent what it holds (tests and benchmarks)."""
        while True:
            with contextlib.suppress(KafkaError):
                await self._call(_noop, needs_active=False)
            if self._queue.empty() and (self._channels is None or self._channels.idle()):
                return
            await asyncio.sleep(0.005)

    # ------------------------------------------------------------------------------ session, events

    async def _attach_session(self) -> None:
        source = self._session_source
        if isinstance(source, Session):
            session = source
        else:
            backoff = 0.05
            while True:
                session = await source()
                if session.state is SessionState.CONNECTED:
                    break
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        if self._session is not None and self._session is not session:
            self._session.remove_listener(self._on_session_state)
        self._session = session
        self._store = ControllerStore(session)
        session.add_listener(self._on_session_state)

    def _on_session_state(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED:
            # Nothing queued can succeed on a dead session: fail it now and handle the expiry next.
            self._fail_pending(KafkaError(ErrorCode.not_controller, "controller session expired"))
            self._post(_Expire())

    def _post(self, event: _Event) -> None:
        if not self._stopped:
            self._queue.put_nowait(event)

    def _fail_pending(self, error: Exception) -> None:
        kept: list[_Event] = []
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if isinstance(event, _ApiCall):
                if not event.future.done():
                    event.future.set_exception(error)
            else:
                kept.append(event)
        for event in kept:
            self._queue.put_nowait(event)

    async def _call(self, call: Callable[[], Awaitable[T]], needs_active: bool = True) -> T:
        if needs_active and not self._active:
            raise KafkaError(ErrorCode.not_controller, f"broker {self.broker_id} is not the controller")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._post(_ApiCall(call, future, needs_active))
        return await future

    def _watch(self, key: object, make: Callable[[], _Event]) -> Callable[[WatchedEvent], None]:
        """A watch callback that posts ``make()`` while this controller generation lasts (one per key, so
        re-arming a watch does not stack callbacks)."""
        callback = self._watchers.get(key)
        if callback is None:
            generation = self._generation

            def callback(event: WatchedEvent) -> None:
                if event.type is not EventType.SESSION and generation == self._generation and self._active:
                    self._post(make())

            self._watchers[key] = callback
        return callback

    def _on_controller_znode(self, event: WatchedEvent) -> None:
        if event.type is not EventType.SESSION:
            self._post(_ControllerChange())

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._process(event)
            except asyncio.CancelledError:
                raise
            except ControllerMovedError as exc:
                log.warning("controller %d: %s; resigning", self.broker_id, exc)
                await self._resign()
                self._post(_ControllerChange())
            except SessionExpiredError:
                log.warning("controller %d: session expired while handling %s", self.broker_id,
                            type(event).__name__)
                await self._resign()
            except ConnectionLossError:
                log.warning("controller %d: connection loss handling %s; retrying", self.broker_id,
                            type(event).__name__)
                self._retry_later(event)
            except Exception:
                log.exception("controller %d: error handling %s", self.broker_id, type(event).__name__)
            finally:
                self.events_processed += 1

    def _retry_later(self, event: _Event) -> None:
        async def later() -> None:
            await asyncio.sleep(self._retry_backoff_ms / 1000)
            self._post(event)

        task = asyncio.get_running_loop().create_task(later())
        self._timer_tasks.add(task)
        task.add_done_callback(self._timer_tasks.discard)

    async def _process(self, event: _Event) -> None:
        if isinstance(event, _ApiCall):
            if event.future.done():
                return
            if event.needs_active and not self._active:
                event.future.set_exception(KafkaError(ErrorCode.not_controller, "controller moved"))
                return
            try:
                result = await event.call()
            except BaseException as exc:
                if not event.future.done():
                    if isinstance(exc, KafkaError):
                        error = exc
                    elif isinstance(exc, ControllerMovedError | CoordinationError | asyncio.CancelledError):
                        error = KafkaError(ErrorCode.not_controller, f"controller failed: {exc!r}")
                    else:
                        error = KafkaError(ErrorCode.unknown_server_error, f"controller failed: {exc!r}")
                    event.future.set_exception(error)
                if isinstance(exc, KafkaError):
                    return  # an answer for the caller, not a controller failure
                raise
            else:
                if not event.future.done():
                    event.future.set_result(result)
            finally:
                await self._flush()
            return
        if isinstance(event, _Startup | _ControllerChange):
            await self._on_controller_change()
            return
        if isinstance(event, _Expire):
            await self._on_expire()
            return
        if not self._active:
            return
        try:
            if isinstance(event, _BrokerChange):
                await self._on_broker_change()
            elif isinstance(event, _TopicChange):
                await self._on_topic_change()
            elif isinstance(event, _PartitionModifications):
                await self._on_partition_modifications(event.topic)
            elif isinstance(event, _TopicDeletion):
                await self._on_topic_deletion_request()
            elif isinstance(event, _ReassignmentZnode):
                await self._on_reassignment_znode()
            elif isinstance(event, _ReassignmentIsrChange):
                await self._on_reassignment_isr_change(event.tp)
            elif isinstance(event, _IsrChangeNotification):
                await self._on_isr_change_notification()
            elif isinstance(event, _PreferredZnode):
                await self._on_preferred_znode()
            elif isinstance(event, _AutoRebalance):
                await self._on_auto_rebalance()
            elif isinstance(event, _StopReplicaDone):
                await self._on_stop_replica_done(event)
            elif isinstance(event, _EpochCheck):
                await self._on_epoch_check()
        finally:
            await self._flush()

    # ------------------------------------------------------------------------------------- election

    @property
    def store(self) -> ControllerStore:
        assert self._store is not None
        return self._store

    async def _on_controller_change(self) -> None:
        was_active = self._active
        active = await self.store.controller_id(self._on_controller_znode)
        self._active_id = active
        if was_active and active != self.broker_id:
            log.info("controller %d: /controller now names %s; resigning", self.broker_id, active)
            await self._resign()
        if active is None:
            await self._elect_controller()
        elif active == self.broker_id and not self._active:
            # Our own leftover registration (a failover that failed half-way): give it up and race again.
            await self.store.delete_controller_if_mine(self.broker_id)

    async def _elect_controller(self) -> None:
        store = self.store
        if not await store.try_register(self.broker_id, self._clock.now_ms()):
            self._active_id = await store.controller_id(self._on_controller_znode)
            return
        self._active_id = self.broker_id
        try:
            epoch = await store.increment_epoch()
        except ControllerMovedError as exc:
            log.warning("controller %d: %s", self.broker_id, exc)
            await store.delete_controller_if_mine(self.broker_id)
            return
        await self._failover(epoch)

    async def _on_epoch_check(self) -> None:
        newest = await self.store.current_epoch()
        if newest > self.ctx.epoch:
            raise ControllerMovedError(f"/controller_epoch is {newest}, newer than ours ({self.ctx.epoch})")

    async def _on_expire(self) -> None:
        await self._resign()
        if self._stopped:
            return
        if isinstance(self._session_source, Session) and self._session_source.state is not SessionState.CONNECTED:
            log.warning("controller %d: session expired and no session factory; staying out of the election",
                        self.broker_id)
            return
        await self._attach_session()
        await self._on_controller_change()

    async def _resign(self) -> None:
        if not self._active and self._channels is None:
            return
        log.info("controller %d: resigning at epoch %d", self.broker_id, self.ctx.epoch)
        self._active = False
        self._generation += 1
        self._watchers.clear()
        for task in list(self._timer_tasks):
            task.cancel()
        self._timer_tasks.clear()
        if self._channels is not None:
            await self._channels.close()
            self._channels = None
        self._batch = RequestBatch()
        self.partition_states.clear()
        self.replica_states.clear()
        self.ctx = ControllerContext()

    async def _failover(self, epoch: int) -> None:
        """Seed 001 section 9 (``onControllerFailover``), with every read pipelined."""
        store = self.store
        self.ctx = ControllerContext(epoch=epoch, epoch_zk_version=store.epoch_zk_version)
        self._active = True
        self._generation += 1
        self._watchers.clear()
        for table in (self.partition_states, self.replica_states):
            table.clear()
            table.controller_id = self.broker_id
            table.epoch = epoch
        log.info("controller %d: elected with epoch %d", self.broker_id, epoch)
        await ensure_kafka_layout(store.session)
        self._channels = ChannelManager(
            self._transport, retry_backoff_ms=self._retry_backoff_ms, request_timeout_ms=self._request_timeout_ms
        )
        ctx = self.ctx
        # Context (9.1): brokers, topics, assignments, leaders, reassignments, preferred elections, deletions.
        for broker_id, (registration, broker_epoch) in (
            await store.brokers(self._watch("brokers", _BrokerChange))
        ).items():
            self._add_live_broker(broker_id, registration, broker_epoch)
        names = await store.topic_names(self._watch("topics", _TopicChange))
        loaded = await store.topics(names, self._topic_watch)
        for topic, lt in loaded.items():
            self._load_topic(topic, lt.assignment)
        ctx.leadership.update(await store.states(sorted(ctx.assignments)))
        for tp, ra in ctx.assignments.items():
            if ra.is_reassigning:
                ctx.being_reassigned[tp] = ra.target
        for tp, target in (await store.reassignments(self._watch("reassign", _ReassignmentZnode))).items():
            if tp in ctx.assignments and tp not in ctx.being_reassigned:
                ctx.being_reassigned[tp] = target
                ctx.reassignment_from_znode.add(tp)
            elif tp in ctx.being_reassigned:
                ctx.reassignment_from_znode.add(tp)
        preferred = await store.preferred_elections(self._watch("preferred", _PreferredZnode))
        queued = await store.topics_to_delete(self._watch("delete", _TopicDeletion))
        await store.isr_change_notifications(self._watch("isr", _IsrChangeNotification))
        self._post(_IsrChangeNotification())
        if self._delete_enabled:
            ctx.topics_to_delete = {t for t in queued if t in ctx.all_topics}
            ctx.topics_ineligible_for_deletion = {
                t for t in ctx.topics_to_delete
                if any(tp.topic == t for tp in ctx.being_reassigned)
                or any(ctx.offline_replicas(tp) for tp in ctx.partitions_of(t))
            }
        else:
            await store.delete_paths(f"/admin/delete_topics/{t}" for t in queued)
        # Everyone learns the new controller and the whole cluster state.
        self._batch.add_update_metadata(ctx.live_or_shutting_down, None)
        # Replica state machine start-up: live replicas online, the others ineligible for deletion.
        online: list[PartitionReplica] = []
        for replica in ctx.replicas_for(sorted(ctx.assignments)):
            if replica.replica in ctx.live_brokers:
                self.replica_states.put(replica, R.ONLINE)
                online.append(replica)
            else:
                self.replica_states.put(replica, R.DELETION_INELIGIBLE)
        self._send_leader_and_isr_to_replicas(online)
        # Partition state machine start-up.
        for tp in ctx.assignments:
            state = ctx.leadership.get(tp)
            if state is None:
                self.partition_states.put(tp, P.NEW)
            elif state.leader in ctx.live_brokers:
                self.partition_states.put(tp, P.ONLINE)
            else:
                self.partition_states.put(tp, P.OFFLINE)
        await self._trigger_online_partitions()
        await self._flush()
        for tp in sorted(ctx.being_reassigned):
            await self._on_partition_reassignment(tp)
        if preferred is not None:
            await self._preferred_election(
                {tp for tp in preferred if not ctx.is_queued_for_deletion(tp.topic)}, from_znode=True)
        if self._auto_rebalance:
            self._start_rebalance_timer()
        await self._resume_deletion()

    def _topic_watch(self, topic: str) -> Callable[[WatchedEvent], None]:
        return self._watch(("topic", topic), lambda: _PartitionModifications(topic))

    def _load_topic(self, topic: str, assignment: TopicAssignment) -> list[TopicPartition]:
        ctx = self.ctx
        ctx.all_topics.add(topic)
        ctx.topic_ids[topic] = assignment.topic_id
        added = []
        for partition, replicas in assignment.partitions.items():
            tp = TopicPartition(topic, partition)
            if tp in ctx.assignments:
                continue
            ctx.assignments[tp] = ReplicaAssignment(
                tuple(replicas),
                tuple(assignment.adding_replicas.get(partition, ())),
                tuple(assignment.removing_replicas.get(partition, ())),
            )
            added.append(tp)
        return sorted(added)

    def _endpoint(self, registration: BrokerRegistration) -> Endpoint:
        for endpoint in registration.endpoints:
            if endpoint.listener == self._listener:
                return endpoint
        return registration.endpoints[0] if registration.endpoints else Endpoint(self._listener, "", -1)

    def _add_live_broker(self, broker_id: int, registration: BrokerRegistration, broker_epoch: int) -> None:
        self.ctx.live_brokers[broker_id] = registration
        self.ctx.broker_epochs[broker_id] = broker_epoch
        assert self._channels is not None
        self._channels.add_broker(broker_id, self._endpoint(registration))

    def _start_rebalance_timer(self) -> None:
        async def ticker() -> None:
            await asyncio.sleep(min(5.0, self._check_interval_s))
            while True:
                self._post(_AutoRebalance())
                await asyncio.sleep(self._check_interval_s)

        task = asyncio.get_running_loop().create_task(ticker(), name=f"controller-{self.broker_id}-rebalance")
        self._timer_tasks.add(task)
        task.add_done_callback(self._timer_tasks.discard)

    # --------------------------------------------------------------------------------- sending

    async def _flush(self) -> None:
        """Send what this round of state changes collected (``sendRequestsToBrokers``)."""
        batch, self._batch = self._batch, RequestBatch()
        if not batch or not self._active or self._channels is None:
            return
        for out in batch.build(self.ctx, self.broker_id):
            callback: Callable[[int, Any], None] = self._response_callback
            if out.api_key == STOP_REPLICA and out.request.delete_partitions:
                callback = self._stop_replica_callback(out.request)
            self._channels.send(out.broker_id, out.api_key, out.request, callback)

    def _response_callback(self, broker: int, response: Any) -> None:
        if getattr(response, "error_code", 0) == ErrorCode.stale_controller_epoch and self._active:
            self._post(_EpochCheck())

    def _stop_replica_callback(self, request: StopReplicaRequest) -> Callable[[int, Any], None]:
        generation = self._generation
        partitions = [TopicPartition(p.topic, p.partition) for p in request.partitions]

        def done(broker: int, response: Any) -> None:
            self._response_callback(broker, response)
            if generation == self._generation:
                self._post(_StopReplicaDone(broker, response, partitions))

        return done

    def _send_leader_and_isr_to_replicas(self, replicas: Iterable[PartitionReplica]) -> None:
        for replica in replicas:
            state = self.ctx.leadership.get(replica.tp)
            if state is not None:
                self._batch.add_leader_and_isr(self.ctx, [replica.replica], replica.tp, state)

    # -------------------------------------------------------------------- partition state machine

    async def _partitions_to(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        election: Election | None = None,
        force_unclean: bool = False,
    ) -> dict[TopicPartition, PartitionResult]:
        """``PartitionStateMachine.handleStateChanges``: refuses illegal moves, elects where it must."""
        valid, invalid = self.partition_states.split(sorted(set(partitions)), target)
        results = {
            tp: PartitionResult(ErrorCode.invalid_request,
                                f"illegal transition {self.partition_states.get(tp).value} -> {target.value}")
            for tp in invalid
        }
        if target is P.NEW:
            for tp in valid:
                self.partition_states.put(tp, P.NEW)
        elif target is P.OFFLINE:
            for tp in valid:
                self.partition_states.put(tp, P.OFFLINE)
        elif target is P.NON_EXISTENT:
            for tp in valid:
                self.partition_states.remove(tp)
        else:
            uninitialized = [tp for tp in valid if self.partition_states.get(tp) is P.NEW]
            to_elect = [tp for tp in valid if self.partition_states.get(tp) is not P.NEW]
            results.update(await self._initialize_partitions(uninitialized))
            if to_elect:
                results.update(await self._elect(to_elect, election or Election.OFFLINE, force_unclean))
            valid_set = set(valid)
            for tp, outcome in results.items():
                if outcome.error is ErrorCode.none and tp in valid_set:
                    self.partition_states.put(tp, P.ONLINE)
        return results

    async def _initialize_partitions(self, partitions: list[TopicPartition]) -> dict[TopicPartition,
                                                                                     PartitionResult]:
        """New -> Online: leader = first live replica, ISR = the live replicas, leader epoch 0."""
        ctx = self.ctx
        results: dict[TopicPartition, PartitionResult] = {}
        wanted: dict[TopicPartition, LeaderIsr] = {}
        for tp in partitions:
            live = [r for r in ctx.replicas_of(tp) if r in ctx.live_broker_ids]
            if not live:
                msg = f"no assigned replica of {list(ctx.replicas_of(tp))} is alive"
                state_change_log.error("[Controller id=%d epoch=%d] partition %s New -> Online failed: %s",
                                       self.broker_id, ctx.epoch, tp, msg)
                results[tp] = PartitionResult(ErrorCode.eligible_leaders_not_available, msg)
                continue
            wanted[tp] = LeaderIsr(live[0], 0, tuple(live), ctx.epoch, 0)
        if not wanted:
            return results
        created, failed = await self.store.create_states(wanted)
        if failed:
            existing = await self.store.states([tp for tp, e in failed.items() if isinstance(e, NodeExistsError)])
            created.update(existing)  # another controller initialised it first: adopt what it wrote
        for tp in wanted:
            state = created.get(tp)
            if state is None:
                results[tp] = PartitionResult(ErrorCode.unknown_server_error, f"writing its state failed: "
                                                                              f"{failed.get(tp)}")
                continue
            ctx.leadership[tp] = state
            live = [r for r in ctx.replicas_of(tp) if r in ctx.live_brokers]
            self._batch.add_leader_and_isr(ctx, live, tp, state, is_new=True)
            results[tp] = PartitionResult(ErrorCode.none)
        return results

    async def _unclean_allowed(self, topics: Iterable[str]) -> dict[str, bool]:
        configs = await self.store.topic_configs(topics)
        return {
            t: _flag(c["unclean.leader.election.enable"]) if "unclean.leader.election.enable" in c
            else self._unclean_default
            for t, c in configs.items()
        }

    async def _elect(
        self, partitions: Sequence[TopicPartition], kind: Election, force_unclean: bool = False
    ) -> dict[TopicPartition, PartitionResult]:
        """Elect, write with compare-and-set, re-read and retry the partitions somebody else wrote first."""
        ctx = self.ctx
        results: dict[TopicPartition, PartitionResult] = {}
        remaining = list(partitions)
        for _attempt in range(10):
            if not remaining:
                break
            unclean: dict[str, bool] = {}
            if kind is Election.OFFLINE:
                topics = {tp.topic for tp in remaining if needs_unclean_config(ctx, tp)}
                unclean = {t: True for t in topics} if force_unclean else await self._unclean_allowed(topics)
            decisions: dict[TopicPartition, Elected] = {}
            refused: list[NotElected] = []
            for tp in remaining:
                decision = elect_leader(kind, ctx, tp, unclean.get(tp.topic, False))
                if isinstance(decision, NotElected):
                    refused.append(decision)
                    results[tp] = PartitionResult(decision.error, decision.reason)
                else:
                    decisions[tp] = decision
            self._log_refused(kind, refused)
            if not decisions:
                break
            written, failed = await self.store.write_states({tp: d.new for tp, d in decisions.items()})
            for tp, state in written.items():
                decision = decisions[tp]
                ctx.leadership[tp] = state
                if decision.unclean:
                    log.warning(
                        "Unclean leader election for partition %s: broker %d leads although it was not in the "
                        "ISR; data may be lost", tp, state.leader)
                state_change_log.info(
                    "[Controller id=%d epoch=%d] %s election for %s: leader %d, leader epoch %d, ISR %s",
                    self.broker_id, ctx.epoch, kind.value, tp, state.leader, state.leader_epoch, list(state.isr))
                self._batch.add_leader_and_isr(ctx, decision.recipients, tp, state)
                results[tp] = PartitionResult(ErrorCode.none)
            stale = [tp for tp, e in failed.items() if isinstance(e, BadVersionError)]
            for tp, error in failed.items():
                if tp not in stale:
                    results[tp] = PartitionResult(ErrorCode.unknown_server_error, str(error))
            if stale:
                ctx.leadership.update(await self.store.states(stale))
            remaining = stale
        for tp in remaining:
            results.setdefault(tp, PartitionResult(ErrorCode.unknown_server_error, "kept losing the race"))
        return results

    def _log_refused(self, kind: Election, refused: list[NotElected]) -> None:
        """One state-change line per partition, as Kafka logs them, but at most ten at ERROR per round: a dead
        rack can leave thousands of partitions offline, and each broker change retries them all."""
        for index, nope in enumerate(refused):
            level = logging.ERROR if index < 10 else logging.DEBUG
            state_change_log.log(level, "[Controller id=%d epoch=%d] %s election for partition %s failed: %s",
                                 self.broker_id, self.ctx.epoch, kind.value, nope.tp, nope.reason)
        if len(refused) > 10:
            state_change_log.error("[Controller id=%d epoch=%d] %s election failed for %d more partitions",
                                   self.broker_id, self.ctx.epoch, kind.value, len(refused) - 10)

    async def _trigger_online_partitions(self) -> None:
        """New or Offline partitions of topics not being deleted -> Online (``triggerOnlinePartitionStateChange``)."""
        ctx = self.ctx
        candidates = [
            tp for tp, s in self.partition_states.items()
            if s in (P.NEW, P.OFFLINE) and not ctx.is_queued_for_deletion(tp.topic)
        ]
        if candidates:
            await self._partitions_to(candidates, P.ONLINE, Election.OFFLINE)

    async def _write_states(self, updates: dict[TopicPartition, LeaderIsr]) -> dict[TopicPartition, LeaderIsr]:
        """Compare-and-set ``updates``; the partitions somebody else wrote first are re-read into the context
        and left out of the result, for the caller to rebuild and retry."""
        written, failed = await self.store.write_states(updates)
        stale = [tp for tp, e in failed.items() if isinstance(e, BadVersionError)]
        if stale:
            self.ctx.leadership.update(await self.store.states(stale))
        self.ctx.leadership.update(written)
        return written

    # ---------------------------------------------------------------------- replica state machine

    async def _replicas_to(self, replicas: Iterable[PartitionReplica], target: ReplicaState) -> None:
        ctx = self.ctx
        table = self.replica_states
        valid, _invalid = table.split(sorted(set(replicas)), target)
        if target is R.NEW:
            for replica in valid:
                state = ctx.leadership.get(replica.tp)
                if state is not None and state.leader == replica.replica:
                    table.log_refusal(replica, target)
                    continue
                if state is not None:
                    self._batch.add_leader_and_isr(ctx, [replica.replica], replica.tp, state)
                table.put(replica, R.NEW)
        elif target is R.ONLINE:
            for replica in valid:
                if table.get(replica) is R.NEW:
                    ra = ctx.assignments.get(replica.tp)
                    if ra is not None and replica.replica not in ra.replicas:
                        ctx.assignments[replica.tp] = ReplicaAssignment((*ra.replicas, replica.replica),
                                                                         ra.adding, ra.removing)
                else:
                    state = ctx.leadership.get(replica.tp)
                    if state is not None:
                        self._batch.add_leader_and_isr(ctx, [replica.replica], replica.tp, state)
                table.put(replica, R.ONLINE)
        elif target is R.OFFLINE:
            await self._replicas_offline(valid)
        elif target is R.DELETION_STARTED:
            for replica in valid:
                table.put(replica, R.DELETION_STARTED)
                self._batch.add_stop_replica(ctx, [replica.replica], replica.tp, delete=True)
        elif target in (R.DELETION_INELIGIBLE, R.DELETION_SUCCESSFUL):
            for replica in valid:
                table.put(replica, target)
        else:  # NON_EXISTENT
            for replica in valid:
                ra = ctx.assignments.get(replica.tp)
                if ra is not None:
                    ctx.assignments[replica.tp] = ReplicaAssignment(
                        tuple(r for r in ra.replicas if r != replica.replica), ra.adding, ra.removing)
                table.remove(replica)

    async def _replicas_offline(self, replicas: list[PartitionReplica]) -> None:
        """StopReplica (no delete) to each, and take it out of its partition's ISR (leader epoch + 1)."""
        ctx = self.ctx
        for replica in replicas:
            self._batch.add_stop_replica(ctx, [replica.replica], replica.tp, delete=False)
        pending = [r for r in replicas if r.tp in ctx.leadership and not ctx.is_queued_for_deletion(r.topic)]
        pending_set = set(pending)
        for replica in replicas:
            if replica not in pending_set:
                self.replica_states.put(replica, R.OFFLINE)
        for _attempt in range(10):
            if not pending:
                break
            # One write per partition per round, even when several of its replicas go offline together.
            by_tp: dict[TopicPartition, list[PartitionReplica]] = {}
            for replica in pending:
                by_tp.setdefault(replica.tp, []).append(replica)
            updates: dict[TopicPartition, LeaderIsr] = {}
            for tp, going in by_tp.items():
                start = ctx.leadership[tp]
                state = start
                for replica in going:
                    shrunk = without_replica(ctx, state, replica.replica)
                    if shrunk is not None:
                        state = shrunk
                if state is not start:
                    updates[tp] = LeaderIsr(state.leader, start.leader_epoch + 1, state.isr, ctx.epoch,
                                            start.zk_version)
                else:
                    for replica in going:
                        self.replica_states.put(replica, R.OFFLINE)
            if not updates:
                break
            written, failed = await self.store.write_states(updates)
            for tp, state in written.items():
                ctx.leadership[tp] = state
                others = [r for r in ctx.replicas_of(tp) if r not in {x.replica for x in by_tp[tp]}]
                self._batch.add_leader_and_isr(ctx, others, tp, state)
                for replica in by_tp[tp]:
                    self.replica_states.put(replica, R.OFFLINE)
            stale = [tp for tp, e in failed.items() if isinstance(e, BadVersionError)]
            for tp, error in failed.items():
                if tp not in stale:
                    state_change_log.error("[Controller id=%d epoch=%d] removing replicas of %s from the ISR "
                                           "failed: %s", self.broker_id, ctx.epoch, tp, error)
            if stale:
                ctx.leadership.update(await self.store.states(stale))
            pending = [r for tp in stale for r in by_tp[tp]]

    # --------------------------------------------------------------------------- brokers

    async def _on_broker_change(self) -> None:
        ctx = self.ctx
        current = await self.store.brokers(self._watch("brokers", _BrokerChange))
        known = dict(ctx.broker_epochs)
        new = sorted(b for b in current if b not in known)
        dead = sorted(b for b in known if b not in current)
        bounced = sorted(b for b in current if b in known and current[b][1] != known[b])
        assert self._channels is not None
        for broker in dead + bounced:
            ctx.live_brokers.pop(broker, None)
            ctx.broker_epochs.pop(broker, None)
            self._channels.remove_broker(broker)
        log.info("controller %d: brokers new %s, dead %s, bounced %s", self.broker_id, new, dead, bounced)
        if dead or bounced:
            await self._on_broker_failure(dead + bounced)
        for broker in new + bounced:
            registration, broker_epoch = current[broker]
            self._add_live_broker(broker, registration, broker_epoch)
        if new or bounced:
            await self._on_broker_startup(new + bounced)
        # A registration that changed in place (new endpoints) only needs new metadata.
        for broker, (registration, _epoch) in current.items():
            if broker in ctx.live_brokers and ctx.live_brokers[broker] != registration:
                ctx.live_brokers[broker] = registration
                self._batch.add_update_metadata(ctx.live_or_shutting_down, [])

    async def _on_broker_startup(self, brokers: list[int]) -> None:
        """Seed 001 section 8.2.3, ``onBrokerStartup``."""
        ctx = self.ctx
        self._batch.add_update_metadata(ctx.live_or_shutting_down, None)
        on_new = ctx.replicas_on(brokers)
        deleting = [r for r in on_new if ctx.is_queued_for_deletion(r.topic)]
        await self._replicas_to([r for r in on_new if not ctx.is_queued_for_deletion(r.topic)], R.ONLINE)
        await self._trigger_online_partitions()
        for tp, target in sorted(ctx.being_reassigned.items()):
            if any(b in target for b in brokers):
                await self._on_partition_reassignment(tp)
        if deleting:
            await self._resume_deletion({r.topic for r in deleting})

    async def _on_broker_failure(self, brokers: list[int]) -> None:
        """Seed 001 section 8.2.3, ``onBrokerFailure``."""
        ctx = self.ctx
        dead = set(brokers)
        ctx.shutting_down -= dead
        without_leader = [
            tp for tp, s in ctx.leadership.items()
            if s.leader in dead and not ctx.is_queued_for_deletion(tp.topic)
        ]
        await self._partitions_to(without_leader, P.OFFLINE)
        await self._trigger_online_partitions()
        on_dead = ctx.replicas_on(dead)
        active = [r for r in on_dead if not ctx.is_queued_for_deletion(r.topic)]
        await self._replicas_to(active, R.OFFLINE)
        deleting = [r for r in on_dead if ctx.is_queued_for_deletion(r.topic)]
        if deleting:
            await self._fail_replica_deletion(deleting)
        if not without_leader:
            self._batch.add_update_metadata(ctx.live_or_shutting_down, None)

    # ---------------------------------------------------------------------- topics, partitions

    async def _on_topic_change(self) -> None:
        ctx = self.ctx
        names = await self.store.topic_names(self._watch("topics", _TopicChange))
        new_topics = names - ctx.all_topics
        gone = ctx.all_topics - names
        for topic in gone:
            if not ctx.is_queued_for_deletion(topic):
                # Removed behind the controller's back (not through /admin/delete_topics): forget it.
                for tp in ctx.partitions_of(topic):
                    self.partition_states.remove(tp)
                for replica in ctx.replicas_for(ctx.partitions_of(topic)):
                    self.replica_states.remove(replica)
                ctx.remove_topic(topic)
        loaded = await self.store.topics(new_topics, self._topic_watch)
        new_partitions: list[TopicPartition] = []
        for topic, lt in loaded.items():
            new_partitions.extend(self._load_topic(topic, lt.assignment))
        if new_partitions:
            log.info("controller %d: new topics %s", self.broker_id, sorted(loaded))
            await self._on_new_partitions(new_partitions)

    async def _on_partition_modifications(self, topic: str) -> None:
        ctx = self.ctx
        if topic not in ctx.all_topics:
            return
        loaded = await self.store.topics([topic], self._topic_watch)
        if topic not in loaded:
            return
        added = [TopicPartition(topic, p) for p in loaded[topic].assignment.partitions
                 if TopicPartition(topic, p) not in ctx.assignments]
        if not added:
            return
        if ctx.is_queued_for_deletion(topic):
            log.error("controller %d: not adding partitions %s of %s: it is being deleted", self.broker_id,
                      [tp.partition for tp in added], topic)
            return
        self._load_topic(topic, loaded[topic].assignment)
        await self._on_new_partitions(sorted(added))

    async def _on_new_partitions(self, partitions: list[TopicPartition]) -> None:
        """``onNewPartitionCreation``: New, then Online with a first leader, replicas likewise."""
        replicas = self.ctx.replicas_for(partitions)
        await self._partitions_to(partitions, P.NEW)
        await self._replicas_to(replicas, R.NEW)
        await self._partitions_to(partitions, P.ONLINE, Election.OFFLINE)
        await self._replicas_to(replicas, R.ONLINE)

    # --------------------------------------------------------------------------- ISR changes

    async def _on_isr_change_notification(self) -> None:
        ctx = self.ctx
        paths, partitions = await self.store.isr_change_notifications(self._watch("isr", _IsrChangeNotification))
        try:
            known = sorted(tp for tp in partitions if tp in ctx.assignments)
            if known:
                ctx.leadership.update(await self.store.states(known))
                self._batch.add_update_metadata(ctx.live_or_shutting_down, known)
                for tp in known:
                    if tp in ctx.being_reassigned:
                        await self._maybe_complete_reassignment(tp)
        finally:
            await self.store.delete_paths(paths)

    # -------------------------------------------------------------------------- reassignment

    async def _on_reassignment_znode(self) -> None:
        ctx = self.ctx
        requested = await self.store.reassignments(self._watch("reassign", _ReassignmentZnode))
        for tp, target in sorted(requested.items()):
            if tp in ctx.being_reassigned:
                continue
            outcome = await self._initiate_reassignment(tp, target)
            if outcome.error is ErrorCode.none and tp in ctx.being_reassigned:
                ctx.reassignment_from_znode.add(tp)
            elif outcome.error is not ErrorCode.none:
                log.error("controller %d: reassignment of %s to %s refused: %s", self.broker_id, tp,
                          list(target), outcome.message)
        await self._rewrite_reassignment_znode(requested)

    async def _rewrite_reassignment_znode(self, requested: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        """Drop partitions that finished or were refused from ``/admin/reassign_partitions``."""
        ctx = self.ctx
        remaining = {tp: t for tp, t in requested.items() if tp in ctx.reassignment_from_znode}
        if remaining != dict(requested) or not remaining:
            await self.store.write_reassignments(remaining)

    async def _alter_reassignments(
        self, wanted: Mapping[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, PartitionResult]:
        ctx = self.ctx
        results: dict[TopicPartition, PartitionResult] = {}
        for tp, target in sorted(wanted.items()):
            if target is None:
                if tp not in ctx.being_reassigned:
                    results[tp] = PartitionResult(ErrorCode.no_reassignment_in_progress,
                                                  f"no reassignment of {tp} in progress")
                    continue
                origin = ctx.assignments[tp].origin
                ctx.being_reassigned[tp] = origin
                await self._on_partition_reassignment(tp)
                results[tp] = PartitionResult(ErrorCode.none)
            else:
                results[tp] = await self._initiate_reassignment(tp, target)
        return results

    async def _initiate_reassignment(self, tp: TopicPartition, target: tuple[int, ...]) -> PartitionResult:
        ctx = self.ctx
        ra = ctx.assignments.get(tp)
        if ra is None:
            return PartitionResult(ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
        if ctx.is_queued_for_deletion(tp.topic):
            return PartitionResult(ErrorCode.unknown_topic_or_partition, f"{tp.topic} is being deleted")
        if not target or len(set(target)) != len(target):
            return PartitionResult(ErrorCode.invalid_replica_assignment, f"invalid replica list {list(target)}")
        unknown = [b for b in target if b not in ctx.live_brokers]
        if unknown:
            return PartitionResult(ErrorCode.invalid_replica_assignment,
                                   f"brokers {unknown} are not registered")
        if tuple(target) == ra.replicas and not ra.is_reassigning:
            return PartitionResult(ErrorCode.none, "already assigned")
        ctx.being_reassigned[tp] = tuple(target)
        ctx.topics_ineligible_for_deletion.add(tp.topic)
        await self._on_partition_reassignment(tp)
        return PartitionResult(ErrorCode.none)

    async def _watch_reassigning_state(self, tp: TopicPartition) -> None:
        state = await self.store.state_with_watch(
            tp, self._watch(("reassign-isr", tp), lambda: _ReassignmentIsrChange(tp)))
        if state is not None:
            self.ctx.leadership[tp] = state

    async def _on_reassignment_isr_change(self, tp: TopicPartition) -> None:
        if tp not in self.ctx.being_reassigned:
            return
        await self._watch_reassigning_state(tp)
        await self._maybe_complete_reassignment(tp)

    async def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        target = self.ctx.being_reassigned.get(tp)
        state = self.ctx.leadership.get(tp)
        if target is not None and state is not None and set(target) <= set(state.isr):
            await self._on_partition_reassignment(tp)

    async def _on_partition_reassignment(self, tp: TopicPartition) -> None:
        """Seed 001 section 7 (``onPartitionReassignment``): phase one until every RAR replica is in the ISR,
        phase two once they all are."""
        ctx = self.ctx
        target = ctx.being_reassigned[tp]
        ra = ctx.assignments[tp]
        origin = ra.origin
        await self._watch_reassigning_state(tp)
        state = ctx.leadership.get(tp)
        if state is None:
            log.error("controller %d: cannot reassign %s: it has no leader and ISR", self.broker_id, tp)
            return
        if not set(target) <= set(state.isr):
            union = tuple(target) + tuple(r for r in origin if r not in target)
            adding = tuple(r for r in target if r not in origin)
            removing = tuple(r for r in origin if r not in target)
            new_ra = ReplicaAssignment(union, adding, removing)
            if new_ra != ra:
                await self._write_assignment(tp, new_ra)
            # Bump the leader epoch so every replica, old and new, learns the new replica set.
            await self._bump_leader_epoch(tp, union)
            await self._replicas_to(
                [PartitionReplica(tp.topic, tp.partition, r) for r in adding
                 if self.replica_states.get(PartitionReplica(tp.topic, tp.partition, r)) is R.NON_EXISTENT],
                R.NEW)
            log.info("controller %d: reassignment of %s to %s waits for %s to join the ISR %s", self.broker_id,
                     tp, list(target), [r for r in target if r not in state.isr], list(state.isr))
            return
        # Phase two: every target replica is in sync.
        await self._replicas_to([PartitionReplica(tp.topic, tp.partition, r) for r in target], R.ONLINE)
        ctx.assignments[tp] = ReplicaAssignment(tuple(target))
        state = ctx.leadership[tp]
        if state.leader not in target or state.leader not in ctx.live_broker_ids:
            await self._elect([tp], Election.REASSIGN)
        else:
            await self._bump_leader_epoch(tp, target)
        old = [PartitionReplica(tp.topic, tp.partition, r) for r in ra.replicas if r not in target]
        if old:
            await self._replicas_to(old, R.OFFLINE)
            await self._replicas_to(old, R.DELETION_STARTED)
            await self._replicas_to(old, R.DELETION_SUCCESSFUL)
            await self._replicas_to(old, R.NON_EXISTENT)
        ctx.assignments[tp] = ReplicaAssignment(tuple(target))
        await self._write_assignment(tp, ctx.assignments[tp])
        del ctx.being_reassigned[tp]
        if tp in ctx.reassignment_from_znode:
            ctx.reassignment_from_znode.discard(tp)
            remaining = await self.store.reassignments(self._watch("reassign", _ReassignmentZnode))
            remaining.pop(tp, None)
            await self.store.write_reassignments(
                {p: t for p, t in remaining.items() if p in ctx.reassignment_from_znode})
        self._batch.add_update_metadata(ctx.live_or_shutting_down, [tp])
        log.info("controller %d: reassignment of %s to %s completed", self.broker_id, tp, list(target))
        await self._resume_deletion({tp.topic})

    async def _write_assignment(self, tp: TopicPartition, ra: ReplicaAssignment) -> None:
        ctx = self.ctx
        ctx.assignments[tp] = ra
        topic_assignments = {p.partition: ctx.assignments[p] for p in ctx.partitions_of(tp.topic)}
        await self.store.write_topic(tp.topic, topic_assignments, ctx.topic_ids.get(tp.topic))

    async def _bump_leader_epoch(self, tp: TopicPartition, recipients: Sequence[int]) -> None:
        """``updateLeaderEpochAndSendRequest``: same leader and ISR, epoch + 1, told to ``recipients``."""
        for _attempt in range(10):
            state = self.ctx.leadership[tp]
            bumped = LeaderIsr(state.leader, state.leader_epoch + 1, state.isr, self.ctx.epoch, state.zk_version)
            written = await self._write_states({tp: bumped})
            if tp in written:
                self._batch.add_leader_and_isr(self.ctx, recipients, tp, written[tp])
                return

    # ------------------------------------------------------------------------ preferred election

    async def _on_preferred_znode(self) -> None:
        ctx = self.ctx
        requested = await self.store.preferred_elections(self._watch("preferred", _PreferredZnode))
        if requested is None:
            return
        partitions = {tp for tp in requested - ctx.preferred_election_in_progress
                      if not ctx.is_queued_for_deletion(tp.topic)}
        await self._preferred_election(partitions, from_znode=True)

    async def _preferred_election(
        self, partitions: set[TopicPartition], from_znode: bool = False
    ) -> dict[TopicPartition, PartitionResult]:
        ctx = self.ctx
        ctx.preferred_election_in_progress |= partitions
        topics = {tp.topic for tp in partitions}
        ctx.topics_ineligible_for_deletion |= topics & ctx.topics_to_delete
        try:
            known = [tp for tp in partitions if tp in ctx.assignments]
            results = await self._partitions_to(known, P.ONLINE, Election.PREFERRED)
            for tp in partitions:
                if tp not in ctx.assignments:
                    results[tp] = PartitionResult(ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
            return results
        finally:
            ctx.preferred_election_in_progress -= partitions
            if from_znode:
                await self.store.delete_fenced(PREFERRED_REPLICA_ELECTION)
            await self._resume_deletion(topics)

    async def _elect_leaders(
        self, partitions: list[TopicPartition] | None, election_type: int
    ) -> dict[TopicPartition, PartitionResult]:
        ctx = self.ctx
        wanted = sorted(ctx.assignments) if partitions is None else partitions
        if election_type == PREFERRED:
            return await self._preferred_election(set(wanted))
        if election_type != UNCLEAN:
            raise KafkaError(ErrorCode.invalid_request, f"unknown election type {election_type}")
        results: dict[TopicPartition, PartitionResult] = {}
        candidates = []
        for tp in wanted:
            state = ctx.leadership.get(tp)
            if tp not in ctx.assignments or state is None:
                results[tp] = PartitionResult(ErrorCode.unknown_topic_or_partition, f"{tp} does not exist")
            elif state.leader in ctx.live_broker_ids:
                results[tp] = PartitionResult(ErrorCode.election_not_needed, f"{tp} has leader {state.leader}")
            else:
                candidates.append(tp)
        results.update(await self._partitions_to(candidates, P.ONLINE, Election.OFFLINE, force_unclean=True))
        return results

    async def _on_auto_rebalance(self) -> None:
        """``checkAndTriggerAutoLeaderRebalance``: per preferred broker, strictly above the percentage."""
        ctx = self.ctx
        if ctx.being_reassigned or ctx.preferred_election_in_progress:
            return
        assignments: dict[object, Sequence[int]] = {
            tp: ra.replicas for tp, ra in ctx.assignments.items() if not ctx.is_queued_for_deletion(tp.topic)
        }
        leaders: dict[object, int] = {tp: s.leader for tp, s in ctx.leadership.items()}
        candidates: set[TopicPartition] = set()
        for broker, partitions in imbalanced_brokers(assignments, leaders, self._imbalance_pct).items():
            if broker not in ctx.live_broker_ids:
                continue
            for tp in partitions:
                assert isinstance(tp, TopicPartition)
                state = ctx.leadership.get(tp)
                if state is not None and broker in state.isr:
                    candidates.add(tp)
        if candidates:
            log.info("controller %d: auto rebalance moves %d leaderships back to preferred replicas",
                     self.broker_id, len(candidates))
            await self._preferred_election(candidates)

    # ------------------------------------------------------------------------ controlled shutdown

    async def _controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        ctx = self.ctx
        if broker_id not in ctx.live_or_shutting_down:
            raise KafkaError(ErrorCode.broker_not_available, f"broker {broker_id} is not registered")
        current_epoch = ctx.broker_epochs.get(broker_id, -1)
        if broker_epoch != -1 and broker_epoch < current_epoch:
            raise KafkaError(ErrorCode.stale_broker_epoch,
                             f"broker epoch {broker_epoch} is older than {current_epoch}")
        ctx.shutting_down.add(broker_id)
        log.info("controller %d: controlled shutdown of broker %d", self.broker_id, broker_id)
        leading: list[TopicPartition] = []
        following: list[PartitionReplica] = []
        for tp in ctx.partitions_on(broker_id):
            state = ctx.leadership.get(tp)
            if state is None or len(ctx.replicas_of(tp)) <= 1:
                continue
            if state.leader == broker_id:
                leading.append(tp)
            else:
                following.append(PartitionReplica(tp.topic, tp.partition, broker_id))
        if leading:
            await self._partitions_to(leading, P.ONLINE, Election.CONTROLLED_SHUTDOWN)
        if following:
            await self._replicas_to(following, R.OFFLINE)
        return {
            tp for tp, s in ctx.leadership.items()
            if s.leader == broker_id and len(ctx.replicas_of(tp)) > 1
        }

    # ---------------------------------------------------------------------------- topic deletion

    async def _on_topic_deletion_request(self) -> None:
        ctx = self.ctx
        requested = await self.store.topics_to_delete(self._watch("delete", _TopicDeletion))
        missing = requested - ctx.all_topics
        if missing:
            log.warning("controller %d: ignoring deletion of unknown topics %s", self.broker_id, sorted(missing))
            await self.store.delete_paths(f"/admin/delete_topics/{t}" for t in missing)
        requested -= missing
        if not requested:
            return
        if not self._delete_enabled:
            log.info("controller %d: delete.topic.enable is false; dropping deletion of %s", self.broker_id,
                     sorted(requested))
            await self.store.delete_paths(f"/admin/delete_topics/{t}" for t in requested)
            return
        new = requested - ctx.topics_to_delete
        for topic in new:
            if any(tp.topic == topic for tp in set(ctx.being_reassigned) | ctx.preferred_election_in_progress):
                ctx.topics_ineligible_for_deletion.add(topic)
        ctx.topics_to_delete |= new
        if new:
            log.info("controller %d: deleting topics %s", self.broker_id, sorted(new))
            await self._resume_deletion()

    async def _resume_deletion(self, unblock: Iterable[str] = ()) -> None:
        """``resumeDeletionForTopics`` + one pass of ``DeleteTopicsThread.doWork``."""
        ctx = self.ctx
        for topic in unblock:
            if topic in ctx.topics_to_delete and not any(
                tp.topic == topic for tp in set(ctx.being_reassigned) | ctx.preferred_election_in_progress
            ):
                ctx.topics_ineligible_for_deletion.discard(topic)
        for topic in sorted(ctx.topics_to_delete):
            replicas = ctx.replicas_for(ctx.partitions_of(topic))
            states = [self.replica_states.get(r) for r in replicas]
            if all(s is R.DELETION_SUCCESSFUL for s in states):
                await self._complete_deletion(topic)
                continue
            if any(s is R.DELETION_STARTED for s in states):
                continue
            if any(s is R.DELETION_INELIGIBLE for s in states) and topic not in ctx.topics_ineligible_for_deletion:
                # Retry: the replicas that failed go back to Offline and deletion starts over.
                await self._replicas_to([r for r in replicas
                                         if self.replica_states.get(r) is R.DELETION_INELIGIBLE], R.OFFLINE)
                ctx.topics_with_deletion_started.discard(topic)
            if topic in ctx.topics_ineligible_for_deletion:
                log.info("controller %d: deletion of %s waits (ineligible)", self.broker_id, topic)
                continue
            if topic not in ctx.topics_with_deletion_started:
                await self._start_topic_deletion(topic)

    async def _start_topic_deletion(self, topic: str) -> None:
        ctx = self.ctx
        ctx.topics_with_deletion_started.add(topic)
        partitions = ctx.partitions_of(topic)
        self._batch.add_update_metadata(ctx.live_or_shutting_down, partitions)
        replicas = ctx.replicas_for(partitions)
        dead = [r for r in replicas if r.replica not in ctx.live_brokers]
        retry = [r for r in replicas
                 if r.replica in ctx.live_brokers and self.replica_states.get(r) is not R.DELETION_SUCCESSFUL]
        await self._replicas_to([r for r in dead if self.replica_states.get(r) in (R.NEW, R.ONLINE)], R.OFFLINE)
        await self._replicas_to([r for r in dead if self.replica_states.get(r) is R.OFFLINE],
                                R.DELETION_INELIGIBLE)
        await self._replicas_to(retry, R.OFFLINE)
        await self._replicas_to(retry, R.DELETION_STARTED)
        if dead:
            log.info("controller %d: deletion of %s is ineligible while brokers %s are down", self.broker_id,
                     topic, sorted({r.replica for r in dead}))
            ctx.topics_ineligible_for_deletion.add(topic)

    async def _fail_replica_deletion(self, replicas: Iterable[PartitionReplica]) -> None:
        ctx = self.ctx
        replicas = list(replicas)
        started = [r for r in replicas if self.replica_states.get(r) is R.DELETION_STARTED]
        await self._replicas_to(started, R.DELETION_INELIGIBLE)
        topics = {r.topic for r in replicas}
        ctx.topics_ineligible_for_deletion |= topics & ctx.topics_to_delete
        await self._resume_deletion()

    async def _on_stop_replica_done(self, event: _StopReplicaDone) -> None:
        ctx = self.ctx
        errors = {(e.topic, e.partition): e.error_code for e in event.response.partition_errors}
        failed: list[PartitionReplica] = []
        succeeded: list[PartitionReplica] = []
        for tp in event.partitions:
            if not ctx.is_queued_for_deletion(tp.topic):
                continue
            replica = PartitionReplica(tp.topic, tp.partition, event.broker)
            if self.replica_states.get(replica) is not R.DELETION_STARTED:
                continue
            if event.response.error_code != 0 or errors.get((tp.topic, tp.partition), 0) != 0:
                failed.append(replica)
            else:
                succeeded.append(replica)
        if failed:
            await self._replicas_to(failed, R.DELETION_INELIGIBLE)
            ctx.topics_ineligible_for_deletion |= {r.topic for r in failed}
        if succeeded:
            await self._replicas_to(succeeded, R.DELETION_SUCCESSFUL)
        await self._resume_deletion({r.topic for r in failed})

    async def _complete_deletion(self, topic: str) -> None:
        """``completeDeleteTopic``: states to NonExistent, znodes removed, context forgotten."""
        ctx = self.ctx
        partitions = ctx.partitions_of(topic)
        await self._replicas_to(ctx.replicas_for(partitions), R.NON_EXISTENT)
        await self._partitions_to(partitions, P.OFFLINE)
        await self._partitions_to(partitions, P.NON_EXISTENT)
        ctx.topics_to_delete.discard(topic)
        ctx.topics_ineligible_for_deletion.discard(topic)
        ctx.topics_with_deletion_started.discard(topic)
        self._watchers.pop(("topic", topic), None)
        await self.store.delete_topic_znodes(topic)
        ctx.remove_topic(topic)
        log.info("controller %d: deletion of topic %s completed", self.broker_id, topic)


async def _noop() -> None:
    return None
