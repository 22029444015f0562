"""The Kafka controller of the ZooKeeper era (seed 001), on one asyncio event queue.

Every broker runs a :class:`Controller`; the one that creates the ephemeral ``/controller`` znode and bumps
``/controller_epoch`` is active. Watches, API calls, channel responses, timers and session expiry only *post events*;
one task takes them off the queue and handles each to the end before the next (as Kafka has done since 1.1), so
the context, the state machines and the request batch are touched by nothing else and need no locks.

This module holds the public surface, the event loop, the controller election and failover (seed 001 sections 1
and 9), and the composition: each family of events has a manager (:mod:`.brokers`, :mod:`.topics`,
:mod:`.deletion`, :mod:`.reassignment`, :mod:`.preferred`, :mod:`.shutdown`, :mod:`.isr`) that decides from the
context and applies through the one :class:`~odradek.controller.applier.Applier`, sharing a
:class:`~odradek.controller.shared.Shared` rather than a base class.

Resignation (session expired, ``/controller`` taken by another broker, a fenced write refused) stops the channels
and the timers, forgets the context, and bumps a generation number that turns every watch armed while active into
a no-op; the coordination session API has no ``removeWatches``, so stale watches are disarmed by ignoring them
when they fire.

Cut from ZooKeeper, the controller retries requests, never events (``KafkaZkClient.retryRequestsUntilConnected``):
its store runs on a :class:`~odradek.coordination.retry.RetryingSession`, so a request that meets a connection
loss waits until the session is back and is sent again, and an event either completes or stops because the
session expired (or the controller was fenced), after which the controller resigns and the next one's failover
rebuilds the context from the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from odradek.clock import Clock
from odradek.controller.batch import RequestBatch
from odradek.controller.brokers import BrokerManager
from odradek.controller.channels import ChannelManager, Transport
from odradek.controller.config import ControllerConfig
from odradek.controller.context import ControllerContext, TopicPartition
from odradek.controller.deletion import DeletionManager
from odradek.controller.events import (
    ApiCall,
    AutoRebalance,
    BrokerChange,
    ControllerChange,
    EpochCheck,
    Event,
    Expire,
    IsrChangeNotification,
    LeaderAndIsrStorageErrors,
    LogDirEventNotification,
    PartitionModifications,
    PreferredZnode,
    ReassignmentIsrChange,
    ReassignmentZnode,
    Startup,
    StopReplicaDone,
    TopicChange,
    TopicDeletion,
)
from odradek.controller.isr import IsrChangeManager
from odradek.controller.log_dirs import LogDirFailureManager
from odradek.controller.machines import PartitionStateMachine, ReplicaStateMachine
from odradek.controller.plan import Plan
from odradek.controller.preferred import PreferredElectionManager
from odradek.controller.reassignment import ReassignmentManager
from odradek.controller.results import PREFERRED, PartitionResult, ReassignmentState
from odradek.controller.shared import Shared
from odradek.controller.shutdown import ControlledShutdownManager
from odradek.controller.states import PartitionState, ReplicaState
from odradek.controller.topics import TopicManager
from odradek.controller.transitions import TransitionLog
from odradek.controller.zkstore import ControllerMovedError, ControllerStore
from odradek.coordination.retry import RetryingSession
from odradek.coordination.store import (
    CoordinationError,
    EventType,
    Session,
    SessionExpiredError,
    SessionState,
    WatchedEvent,
)
from odradek.coordination.znodes import ensure_kafka_layout
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.controller_requests import LEADER_AND_ISR, STOP_REPLICA, StopReplicaRequest

log = logging.getLogger("odradek.controller")

P = PartitionState
R = ReplicaState
T = TypeVar("T")

SessionSource = Session | Callable[[], Awaitable[Session]]

__all__ = ["Controller", "SessionSource"]


class Controller:
    """One broker's controller; see the package docstring for the public surface."""

    def __init__(
        self,
        broker_id: int,
        session: SessionSource,
        clock: Clock,
        transport: Transport,
        config: Mapping[str, Any] | None = None,
        gate: asyncio.Event | None = None,
    ) -> None:
        """``gate``, when given, is waited on before each event: cleared, the controller stands still (a paused
        broker process) with its events queued."""
        self.broker_id = broker_id
        self._gate = gate
        self._session_source = session
        self._clock = clock
        self._transport = transport
        self._config = ControllerConfig.from_mapping(config)
        self._session: Session | None = None
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._loop_task: asyncio.Task[None] | None = None
        self._stopped = False
        self._active_id: int | None = None
        self.events_processed = 0

        shared = self._shared = Shared(broker_id, self._config, clock, self._post)
        partitions = self._partitions = PartitionStateMachine(shared)
        replicas = self._replicas = ReplicaStateMachine(shared)
        self._deletion = DeletionManager(shared, partitions, replicas)
        self._reassignment = ReassignmentManager(shared, partitions, replicas, self._deletion)
        self._preferred = PreferredElectionManager(shared, partitions, self._deletion)
        self._shutdown = ControlledShutdownManager(shared, partitions, replicas)
        self._topics = TopicManager(shared, partitions, replicas)
        self._brokers = BrokerManager(shared, partitions, replicas, self._reassignment, self._deletion)
        self._isr = IsrChangeManager(shared, self._reassignment)
        self._log_dirs = LogDirFailureManager(shared, partitions, replicas)

    # ------------------------------------------------------------------------------------ public surface

    @property
    def ctx(self) -> ControllerContext:
        """The context of this term (empty when not active); for tests and benchmarks to look at."""
        return self._shared.ctx

    @property
    def is_active(self) -> bool:
        return self._shared.active

    @property
    def epoch(self) -> int:
        """The controller epoch this broker holds while active (0 when it is not the controller)."""
        return self._shared.ctx.epoch if self._shared.active else 0

    @property
    def transitions(self) -> TransitionLog:
        """The recent partition, replica and controller state changes this broker made as controller."""
        return self._shared.transitions

    @property
    def unclean_elections(self) -> int:
        return self._shared.unclean_elections

    def partition_states(self) -> list[tuple[TopicPartition, PartitionState]]:
        """Where the partition state machine has every partition (empty when not active)."""
        return self._shared.partition_states.items()

    def registration_changed(self) -> None:
        """This broker rewrote its ``/brokers/ids/{id}`` in place (new endpoints): when it is the active
        controller, it re-reads the registrations as on a broker change and sends every broker the new metadata.
        Kafka's controller watches each registration for this; odradek's watches only the list of brokers."""
        if self._shared.active:
            self._post(BrokerChange())

    @property
    def active_controller_id(self) -> int | None:
        """Who this broker last saw in ``/controller``."""
        return self._active_id

    async def start(self) -> None:
        """Open (or adopt) the session, start the event loop and join the election."""
        self._stopped = False
        await self._attach_session()
        self._loop_task = asyncio.get_running_loop().create_task(self._run(), name=f"controller-{self.broker_id}")
        self._post(Startup())

    async def stop(self) -> None:
        """Resign if active (deleting ``/controller`` so another broker takes over at once) and stop."""
        self._stopped = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            await asyncio.wait({self._loop_task})
            self._loop_task = None
        was_active = self._shared.active
        await self._resign()
        if was_active and self._session is not None:
            # Straight on the session, not retried: a broker stopping while cut off must not wait for ZooKeeper
            # (its ephemeral goes with its session anyway).
            with contextlib.suppress(CoordinationError):
                await ControllerStore(self._session).delete_controller_if_mine(self.broker_id)
        self._fail_pending(KafkaError(ErrorCode.not_controller, "controller stopped"))
        if self._session is not None:
            self._session.remove_listener(self._on_session_state)

    async def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None, election_type: int = PREFERRED
    ) -> dict[TopicPartition, PartitionResult]:
        """ElectLeaders: preferred (0) or unclean (1) election; ``None`` means every partition."""
        wanted = None if partitions is None else [TopicPartition(t, p) for t, p in partitions]
        return await self._call(lambda: self._preferred.elect_leaders(wanted, election_type))

    async def alter_partition_reassignments(
        self, reassignments: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[TopicPartition, PartitionResult]:
        """AlterPartitionReassignments: target replicas per partition, ``None`` to cancel one in progress."""
        wanted = {TopicPartition(t, p): (None if r is None else tuple(r)) for (t, p), r in reassignments.items()}
        return await self._call(lambda: self._reassignment.alter(wanted))

    async def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None
    ) -> dict[TopicPartition, ReassignmentState]:
        wanted = None if partitions is None else {TopicPartition(t, p) for t, p in partitions}

        async def listing() -> dict[TopicPartition, ReassignmentState]:
            ctx = self._shared.ctx
            out = {}
            for tp in sorted(ctx.being_reassigned):
                if wanted is not None and tp not in wanted:
                    continue
                ra = ctx.assignments.get(tp)
                if ra is not None:
                    out[tp] = ReassignmentState(ra.replicas, ra.adding, ra.removing)
            return out

        return await self._call(listing)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int = -1) -> set[TopicPartition]:
        """Move ``broker_id``'s leaderships away and shrink it out of ISRs; returns the partitions it still
        leads (the broker retries until this is empty or its timeout passes)."""
        return await self._call(lambda: self._shutdown.shutdown(broker_id, broker_epoch))

    async def wait_idle(self) -> None:
        """Until the event queue is empty and every channel has sent what it holds (tests and benchmarks)."""
        while True:
            with contextlib.suppress(KafkaError):
                await self._call(_noop, needs_active=False)
            channels = self._shared.channels
            if self._queue.empty() and (channels is None or channels.idle()):
                return
            await asyncio.sleep(0.005)

    # ------------------------------------------------------------------------------------ session, queue

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
                # Waits for a real session to come back, so real time, not the injected clock.
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        if self._session is not None and self._session is not session:
            self._session.remove_listener(self._on_session_state)
        self._session = session
        self._shared.store_or_none = ControllerStore(RetryingSession(session, f"controller {self.broker_id}"))
        session.add_listener(self._on_session_state)

    def _on_session_state(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED:
            # Nothing queued can succeed on a dead session: fail it now and handle the expiry next.
            self._fail_pending(KafkaError(ErrorCode.not_controller, "controller session expired"))
            self._post(Expire())

    def _post(self, event: Event) -> None:
        if not self._stopped:
            self._queue.put_nowait(event)

    def _fail_pending(self, error: Exception) -> None:
        kept: list[Event] = []
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if isinstance(event, ApiCall):
                if not event.future.done():
                    event.future.set_exception(error)
            else:
                kept.append(event)
        for event in kept:
            self._queue.put_nowait(event)

    async def _call(self, call: Callable[[], Awaitable[T]], needs_active: bool = True) -> T:
        if needs_active and not self._shared.active:
            raise KafkaError(ErrorCode.not_controller, f"broker {self.broker_id} is not the controller")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._post(ApiCall(call, future, needs_active))
        return await future

    def _on_controller_znode(self, event: WatchedEvent) -> None:
        if event.type is not EventType.SESSION:
            self._post(ControllerChange())

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            if self._gate is not None:
                await self._gate.wait()
            try:
                await self._process(event)
            except asyncio.CancelledError:
                raise
            except ControllerMovedError as exc:
                log.warning("controller %d: %s; resigning", self.broker_id, exc)
                await self._resign()
                self._post(ControllerChange())
            except SessionExpiredError:
                log.warning("controller %d: session expired while handling %s", self.broker_id,
                            type(event).__name__)
                await self._resign()
            except Exception:
                log.exception("controller %d: error handling %s", self.broker_id, type(event).__name__)
            finally:
                self.events_processed += 1

    async def _process(self, event: Event) -> None:
        if isinstance(event, ApiCall):
            if event.future.done():
                return
            if event.needs_active and not self._shared.active:
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
        if isinstance(event, Startup | ControllerChange):
            await self._on_controller_change()
            return
        if isinstance(event, Expire):
            await self._on_expire()
            return
        if not self._shared.active:
            return
        try:
            if isinstance(event, BrokerChange):
                await self._brokers.on_change()
            elif isinstance(event, TopicChange):
                await self._topics.on_change()
            elif isinstance(event, PartitionModifications):
                await self._topics.on_partition_modifications(event.topic)
            elif isinstance(event, TopicDeletion):
                await self._deletion.on_request()
            elif isinstance(event, ReassignmentZnode):
                await self._reassignment.on_znode()
            elif isinstance(event, ReassignmentIsrChange):
                await self._reassignment.on_isr_change(event.tp)
            elif isinstance(event, IsrChangeNotification):
                await self._isr.on_notification()
            elif isinstance(event, LogDirEventNotification):
                await self._log_dirs.on_notification()
            elif isinstance(event, LeaderAndIsrStorageErrors):
                await self._log_dirs.on_storage_errors(event.broker, event.partitions)
            elif isinstance(event, PreferredZnode):
                await self._preferred.on_znode()
            elif isinstance(event, AutoRebalance):
                await self._preferred.on_auto_rebalance()
            elif isinstance(event, StopReplicaDone):
                await self._deletion.on_stop_replica_done(event)
            elif isinstance(event, EpochCheck):
                await self._on_epoch_check()
        finally:
            await self._flush()

    # ------------------------------------------------------------------------------- election, failover

    async def _on_controller_change(self) -> None:
        shared = self._shared
        was_active = shared.active
        active = await shared.store.controller_id(self._on_controller_znode)
        self._active_id = active
        if was_active and active != self.broker_id:
            log.info("controller %d: /controller now names %s; resigning", self.broker_id, active)
            await self._resign()
        if active is None:
            await self._elect_controller()
        elif active == self.broker_id and not shared.active:
            # Our own leftover registration (a failover that failed half-way): give it up and race again.
            await shared.store.delete_controller_if_mine(self.broker_id)

    async def _elect_controller(self) -> None:
        store = self._shared.store
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
        ctx = self._shared.ctx
        newest = await self._shared.store.current_epoch()
        if newest > ctx.epoch:
            raise ControllerMovedError(f"/controller_epoch is {newest}, newer than ours ({ctx.epoch})")

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
        shared = self._shared
        if not shared.active and shared.channels is None:
            return
        log.info("controller %d: resigning at epoch %d", self.broker_id, shared.ctx.epoch)
        shared.note(f"broker {self.broker_id}", "active", "resigned")
        shared.active = False
        shared.cancel_timers()
        if shared.channels is not None:
            await shared.channels.close()
            shared.channels = None
        shared.reset(ControllerContext())

    async def _failover(self, epoch: int) -> None:
        """Seed 001 section 9 (``onControllerFailover``), with every read pipelined."""
        shared = self._shared
        store = shared.store
        shared.reset(ControllerContext(epoch=epoch, epoch_zk_version=store.epoch_zk_version))
        shared.active = True
        log.info("controller %d: elected with epoch %d", self.broker_id, epoch)
        shared.note(f"broker {self.broker_id}", "standby", "active", f"elected with controller epoch {epoch}")
        await ensure_kafka_layout(store.session)
        shared.channels = ChannelManager(self._transport, retry_backoff_ms=self._config.retry_backoff_ms,
                                         request_timeout_ms=self._config.request_timeout_ms)
        ctx = shared.ctx
        # Context (9.1): brokers, topics, assignments, leaders, reassignments, preferred elections, deletions.
        await self._brokers.load()
        names = await store.topic_names(shared.watch("topics", TopicChange))
        loaded = await store.topics(names, self._topics.topic_watch)
        for topic, lt in loaded.items():
            self._topics.load(topic, lt.assignment)
        ctx.leadership.update(await store.states(sorted(ctx.assignments)))
        for tp, ra in ctx.assignments.items():
            if ra.is_reassigning:
                ctx.being_reassigned[tp] = ra.target
        for tp, target in (await store.reassignments(shared.watch("reassign", ReassignmentZnode))).items():
            if tp in ctx.assignments and tp not in ctx.being_reassigned:
                ctx.being_reassigned[tp] = target
                ctx.reassignment_from_znode.add(tp)
            elif tp in ctx.being_reassigned:
                ctx.reassignment_from_znode.add(tp)
        preferred = await store.preferred_elections(shared.watch("preferred", PreferredZnode))
        queued = await store.topics_to_delete(shared.watch("delete", TopicDeletion))
        await self._isr.arm()
        self._post(IsrChangeNotification())
        await self._log_dirs.arm()
        self._post(LogDirEventNotification())
        if self._config.delete_enabled:
            ctx.topics_to_delete = {t for t in queued if t in ctx.all_topics}
            ctx.topics_ineligible_for_deletion = {
                t for t in ctx.topics_to_delete
                if any(tp.topic == t for tp in ctx.being_reassigned)
                or any(ctx.offline_replicas(tp) for tp in ctx.partitions_of(t))
            }
        else:
            await shared.applier.apply(Plan(consumed=[f"/admin/delete_topics/{t}" for t in queued]))
        # Everyone learns the new controller and the whole cluster state.
        shared.batch.add_update_metadata(ctx.live_or_shutting_down, None)
        # Replica state machine start-up: live replicas online (each told its partition's state), the others
        # ineligible for deletion.
        replica_states = shared.replica_states
        batch = shared.batch
        for replica in ctx.replicas_for(sorted(ctx.assignments)):
            if replica.replica in ctx.live_brokers:
                replica_states.load(replica, R.ONLINE)
                state = ctx.leadership.get(replica.tp)
                if state is not None:
                    batch.add_leader_and_isr(ctx, [replica.replica], replica.tp, state)
            else:
                replica_states.load(replica, R.DELETION_INELIGIBLE)
        # Partition state machine start-up.
        partition_states = shared.partition_states
        for tp in ctx.assignments:
            state = ctx.leadership.get(tp)
            if state is None:
                partition_states.load(tp, P.NEW)
            elif state.leader in ctx.live_brokers:
                partition_states.load(tp, P.ONLINE)
            else:
                partition_states.load(tp, P.OFFLINE)
        await self._partitions.trigger_online()
        await self._flush()
        await self._reassignment.resume(sorted(ctx.being_reassigned))
        if preferred is not None:
            await self._preferred.run(
                {tp for tp in preferred if not ctx.is_queued_for_deletion(tp.topic)}, from_znode=True)
        if self._config.auto_rebalance:
            self._preferred.start_timer()
        await self._deletion.resume()

    # ------------------------------------------------------------------------------------------ requests

    async def _flush(self) -> None:
        """Send what this round of state changes collected (``sendRequestsToBrokers``)."""
        shared = self._shared
        batch, shared.batch = shared.batch, RequestBatch()
        if not batch or not shared.active or shared.channels is None:
            return
        for out in batch.build(shared.ctx, self.broker_id, shared.config.listener):
            callback: Callable[[int, Any], None] = self._response_callback
            if out.api_key == STOP_REPLICA and out.request.delete_partitions:
                callback = self._stop_replica_callback(out.request)
            elif out.api_key == LEADER_AND_ISR:
                callback = self._leader_and_isr_callback()
            shared.channels.send(out.broker_id, out.api_key, out.request, callback)

    def _response_callback(self, broker: int, response: Any) -> None:
        if getattr(response, "error_code", 0) == ErrorCode.stale_controller_epoch and self._shared.active:
            self._post(EpochCheck())

    def _leader_and_isr_callback(self) -> Callable[[int, Any], None]:
        """Storage errors in the answer are how the controller learns of replicas on a failed log directory."""
        generation = self._shared.generation

        def done(broker: int, response: Any) -> None:
            self._response_callback(broker, response)
            offline = {TopicPartition(e.topic, e.partition) for e in getattr(response, "partition_errors", ())
                       if e.error_code == ErrorCode.kafka_storage_error}
            if offline and generation == self._shared.generation:
                self._post(LeaderAndIsrStorageErrors(broker, offline))

        return done

    def _stop_replica_callback(self, request: StopReplicaRequest) -> Callable[[int, Any], None]:
        generation = self._shared.generation
        partitions = [TopicPartition(p.topic, p.partition) for p in request.partitions]

        def done(broker: int, response: Any) -> None:
            self._response_callback(broker, response)
            if generation == self._shared.generation:
                self._post(StopReplicaDone(broker, response, partitions))

        return done


async def _noop() -> None:
    return None


