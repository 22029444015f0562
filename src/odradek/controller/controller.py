"""The Kafka controller of the ZooKeeper era (seed 001), on one asyncio event queue.

Every broker runs a :class:`Controller`; the one that creates the ephemeral ``/controller`` znode and bumps
``/controller_epoch`` is active. Watches, API calls, channel responses, timers and session expiry only *post events*;
one task takes them off the queue and handles each to the end before the next (as Kafka has done since 1.1), so
the context, the state machines and the request batch are touched by nothing else and need no locks. The decisions
themselves are pure functions (:mod:`.election`, :mod:`.states`, :mod:`.batch`); the state machines
(:mod:`.machines`) and operations (:mod:`.operations`) sequence them, and this module holds the public surface,
the event loop, the election and failover, and the broker, topic and ISR-change handlers. I/O goes through
:class:`~odradek.controller.zkstore.ControllerStore` (reads, fenced writes) and the per-broker channels.

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
from typing import Any, TypeVar

from odradek.controller.base import PREFERRED, UNCLEAN, PartitionResult, ReassignmentState
from odradek.controller.batch import RequestBatch
from odradek.controller.channels import ChannelManager
from odradek.controller.context import ControllerContext, PartitionReplica, ReplicaAssignment, TopicPartition
from odradek.controller.election import Election
from odradek.controller.events import (
    ApiCall,
    AutoRebalance,
    BrokerChange,
    ControllerChange,
    EpochCheck,
    Event,
    Expire,
    IsrChangeNotification,
    PartitionModifications,
    PreferredZnode,
    ReassignmentIsrChange,
    ReassignmentZnode,
    Startup,
    StopReplicaDone,
    TopicChange,
    TopicDeletion,
)
from odradek.controller.operations import Operations
from odradek.controller.requests import STOP_REPLICA, StopReplicaRequest
from odradek.controller.states import PartitionState, ReplicaState
from odradek.controller.zkstore import ControllerMovedError, ControllerStore
from odradek.coordination.store import (
    ConnectionLossError,
    CoordinationError,
    EventType,
    Session,
    SessionExpiredError,
    SessionState,
    WatchedEvent,
)
from odradek.coordination.znodes import BrokerRegistration, Endpoint, TopicAssignment, ensure_kafka_layout
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger("odradek.controller")

P = PartitionState
R = ReplicaState
T = TypeVar("T")


__all__ = ["PREFERRED", "UNCLEAN", "Controller", "PartitionResult", "ReassignmentState"]


class Controller(Operations):
    """One broker's controller; see the package docstring for the public surface."""

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
        self._post(Startup())

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
            self._post(Expire())

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
        if needs_active and not self._active:
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
            except ConnectionLossError:
                log.warning("controller %d: connection loss handling %s; retrying", self.broker_id,
                            type(event).__name__)
                self._retry_later(event)
            except Exception:
                log.exception("controller %d: error handling %s", self.broker_id, type(event).__name__)
            finally:
                self.events_processed += 1

    def _retry_later(self, event: Event) -> None:
        async def later() -> None:
            await asyncio.sleep(self._retry_backoff_ms / 1000)
            self._post(event)

        task = asyncio.get_running_loop().create_task(later())
        self._timer_tasks.add(task)
        task.add_done_callback(self._timer_tasks.discard)

    async def _process(self, event: Event) -> None:
        if isinstance(event, ApiCall):
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
        if isinstance(event, Startup | ControllerChange):
            await self._on_controller_change()
            return
        if isinstance(event, Expire):
            await self._on_expire()
            return
        if not self._active:
            return
        try:
            if isinstance(event, BrokerChange):
                await self._on_broker_change()
            elif isinstance(event, TopicChange):
                await self._on_topic_change()
            elif isinstance(event, PartitionModifications):
                await self._on_partition_modifications(event.topic)
            elif isinstance(event, TopicDeletion):
                await self._on_topic_deletion_request()
            elif isinstance(event, ReassignmentZnode):
                await self._on_reassignment_znode()
            elif isinstance(event, ReassignmentIsrChange):
                await self._on_reassignment_isr_change(event.tp)
            elif isinstance(event, IsrChangeNotification):
                await self._on_isr_change_notification()
            elif isinstance(event, PreferredZnode):
                await self._on_preferred_znode()
            elif isinstance(event, AutoRebalance):
                await self._on_auto_rebalance()
            elif isinstance(event, StopReplicaDone):
                await self._on_stop_replica_done(event)
            elif isinstance(event, EpochCheck):
                await self._on_epoch_check()
        finally:
            await self._flush()

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
            await store.brokers(self._watch("brokers", BrokerChange))
        ).items():
            self._add_live_broker(broker_id, registration, broker_epoch)
        names = await store.topic_names(self._watch("topics", TopicChange))
        loaded = await store.topics(names, self._topic_watch)
        for topic, lt in loaded.items():
            self._load_topic(topic, lt.assignment)
        ctx.leadership.update(await store.states(sorted(ctx.assignments)))
        for tp, ra in ctx.assignments.items():
            if ra.is_reassigning:
                ctx.being_reassigned[tp] = ra.target
        for tp, target in (await store.reassignments(self._watch("reassign", ReassignmentZnode))).items():
            if tp in ctx.assignments and tp not in ctx.being_reassigned:
                ctx.being_reassigned[tp] = target
                ctx.reassignment_from_znode.add(tp)
            elif tp in ctx.being_reassigned:
                ctx.reassignment_from_znode.add(tp)
        preferred = await store.preferred_elections(self._watch("preferred", PreferredZnode))
        queued = await store.topics_to_delete(self._watch("delete", TopicDeletion))
        await store.isr_change_notifications(self._watch("isr", IsrChangeNotification))
        self._post(IsrChangeNotification())
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
        return self._watch(("topic", topic), lambda: PartitionModifications(topic))

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
                self._post(AutoRebalance())
                await asyncio.sleep(self._check_interval_s)

        task = asyncio.get_running_loop().create_task(ticker(), name=f"controller-{self.broker_id}-rebalance")
        self._timer_tasks.add(task)
        task.add_done_callback(self._timer_tasks.discard)

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
            self._post(EpochCheck())

    def _stop_replica_callback(self, request: StopReplicaRequest) -> Callable[[int, Any], None]:
        generation = self._generation
        partitions = [TopicPartition(p.topic, p.partition) for p in request.partitions]

        def done(broker: int, response: Any) -> None:
            self._response_callback(broker, response)
            if generation == self._generation:
                self._post(StopReplicaDone(broker, response, partitions))

        return done

    def _send_leader_and_isr_to_replicas(self, replicas: Iterable[PartitionReplica]) -> None:
        for replica in replicas:
            state = self.ctx.leadership.get(replica.tp)
            if state is not None:
                self._batch.add_leader_and_isr(self.ctx, [replica.replica], replica.tp, state)

    async def _on_broker_change(self) -> None:
        ctx = self.ctx
        current = await self.store.brokers(self._watch("brokers", BrokerChange))
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

    async def _on_topic_change(self) -> None:
        ctx = self.ctx
        names = await self.store.topic_names(self._watch("topics", TopicChange))
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

    async def _on_isr_change_notification(self) -> None:
        ctx = self.ctx
        paths, partitions = await self.store.isr_change_notifications(self._watch("isr", IsrChangeNotification))
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


async def _noop() -> None:
    return None
