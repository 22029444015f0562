"""A cluster of simulated brokers around real controllers on a real coordination store.

Only the brokers' network side is played: :class:`RecordingTransport` records every controller request and answers
as a broker would (success, or STALE_CONTROLLER_EPOCH to a controller older than one it has heard from). Each
:class:`SimBroker` registers ``/brokers/ids/{id}`` with its own session and runs a real :class:`Controller`; the
store is the embedded backend (or real ZooKeeper), so elections, watches, fencing and session expiry are real.
:class:`StoreFaults` makes chosen writes of the controllers fail, to see what a refused write leaves behind.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.clock import Clock, SystemClock
from odradek.controller import Controller
from odradek.coordination import Backend, CoordinationError, Op, Session
from odradek.coordination.znodes import (
    BrokerRegistration,
    Endpoint,
    PartitionState,
    TopicAssignment,
    TopicConfig,
    ensure_kafka_layout,
    partition_state_path,
    topic_config_path,
    topic_path,
)
from odradek.protocol.controller_requests import (
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    LeaderAndIsrResponse,
    PartitionError,
    StopReplicaResponse,
    UpdateMetadataResponse,
    decode_request,
    encode_body,
)

STALE_CONTROLLER_EPOCH = 11


async def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    """Poll ``predicate`` (sync or async) until truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await asyncio.sleep(0.01)


@dataclass
class Received:
    broker_id: int
    api_key: int
    request: Any
    accepted: bool


@dataclass
class BrokerView:
    """What one simulated broker has applied: the newest controller epoch, its partitions' leader/ISR."""

    controller_epoch: int = 0
    leaders: dict[tuple[str, int], tuple[int, int, tuple[int, ...]]] = field(default_factory=dict)
    metadata: dict[tuple[str, int], int] = field(default_factory=dict)
    stopped: set[tuple[str, int]] = field(default_factory=set)
    deleted: set[tuple[str, int]] = field(default_factory=set)


class RecordingTransport:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.views: dict[int, BrokerView] = {}
        self.down: set[int] = set()
        self.stop_replica_errors: dict[int, int] = {}
        self.before_send: Callable[[int, int, Any], Awaitable[None]] | None = None

    async def send(self, broker_id: int, endpoint: Endpoint, api_key: int, body: bytes) -> bytes:
        await asyncio.sleep(0)
        if broker_id in self.down:
            raise ConnectionRefusedError(f"broker {broker_id} is down")
        request = decode_request(api_key, body)
        if self.before_send is not None:
            await self.before_send(broker_id, api_key, request)
        view = self.views.setdefault(broker_id, BrokerView())
        stale = request.controller_epoch < view.controller_epoch
        self.received.append(Received(broker_id, api_key, request, not stale))
        if api_key == LEADER_AND_ISR:
            if stale:
                return encode_body(LeaderAndIsrResponse(STALE_CONTROLLER_EPOCH))
            view.controller_epoch = request.controller_epoch
            for s in request.partition_states:
                view.leaders[(s.topic, s.partition)] = (s.leader, s.leader_epoch, tuple(s.isr))
                view.stopped.discard((s.topic, s.partition))
            return encode_body(LeaderAndIsrResponse(0, [PartitionError(s.topic, s.partition)
                                                        for s in request.partition_states]))
        if api_key == UPDATE_METADATA:
            if stale:
                return encode_body(UpdateMetadataResponse(STALE_CONTROLLER_EPOCH))
            view.controller_epoch = request.controller_epoch
            for s in request.partition_states:
                view.metadata[(s.topic, s.partition)] = s.leader
            return encode_body(UpdateMetadataResponse(0))
        if api_key == STOP_REPLICA:
            if stale:
                return encode_body(StopReplicaResponse(STALE_CONTROLLER_EPOCH))
            view.controller_epoch = request.controller_epoch
            code = self.stop_replica_errors.get(broker_id, 0)
            for p in request.partitions:
                view.stopped.add((p.topic, p.partition))
                view.leaders.pop((p.topic, p.partition), None)
                if request.delete_partitions and code == 0:
                    view.deleted.add((p.topic, p.partition))
            return encode_body(StopReplicaResponse(0, [PartitionError(p.topic, p.partition, code)
                                                       for p in request.partitions]))
        raise AssertionError(f"unexpected api key {api_key}")

    def requests(self, api_key: int, broker_id: int | None = None, epoch: int | None = None) -> list[Any]:
        return [
            r.request for r in self.received
            if r.api_key == api_key and (broker_id is None or r.broker_id == broker_id)
            and (epoch is None or r.request.controller_epoch == epoch)
        ]

    def leader_seen_by(self, broker_id: int, topic: str, partition: int) -> int | None:
        view = self.views.get(broker_id)
        entry = view.leaders.get((topic, partition)) if view else None
        return entry[0] if entry else None


class StoreFaults:
    """Refuses the controllers' transactions that touch chosen znodes, as the store refuses a failed op: the whole
    multi fails with the op's index set, and nothing is written."""

    def __init__(self) -> None:
        self.failing: dict[str, type[CoordinationError]] = {}
        self.refused: list[str] = []

    def fail(self, *paths: str, error: type[CoordinationError] = CoordinationError) -> None:
        self.failing.update(dict.fromkeys(paths, error))

    def clear(self) -> None:
        self.failing.clear()

    def check(self, ops: list[Op]) -> None:
        for index, op in enumerate(ops):
            if op.path in self.failing:
                self.refused.append(op.path)
                error = self.failing[op.path](op.path, "injected failure")
                error.failed_op_index = index
                raise error


class FaultySession:
    """A broker's session as its controller sees it: every call goes through, except :class:`StoreFaults`'
    refusals of ``multi`` (the only way the controller writes the cluster state)."""

    def __init__(self, session: Session, faults: StoreFaults) -> None:
        self._session = session
        self._faults = faults

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def multi(self, ops: list[Op]) -> list[Any]:
        self._faults.check(ops)
        return await self._session.multi(ops)


class SimBroker:
    def __init__(self, cluster: SimCluster, broker_id: int, rack: str | None, config: Mapping[str, Any]) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.rack = rack
        self.config = config
        self.session: Session | None = None
        self.controller: Controller | None = None
        self.alive = False
        self._wrapped: tuple[Session, Any] | None = None

    async def current_session(self) -> Any:
        assert self.session is not None
        faults = self.cluster.faults
        if faults is None:
            return self.session
        if self._wrapped is None or self._wrapped[0] is not self.session:
            self._wrapped = (self.session, FaultySession(self.session, faults))
        return self._wrapped[1]

    async def start(self) -> None:
        self.session = await self.cluster.backend.session(timeout_ms=6_000)
        await ensure_kafka_layout(self.session)
        registration = BrokerRegistration(
            self.broker_id, (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + self.broker_id),), rack=self.rack,
            timestamp=int(time.time() * 1000),
        )
        await self.session.create(f"/brokers/ids/{self.broker_id}", registration.to_json(), ephemeral=True)
        self.cluster.transport.down.discard(self.broker_id)
        self.controller = Controller(self.broker_id, self.current_session, self.cluster.clock or SystemClock(),
                                     self.cluster.transport, self.config)
        await self.controller.start()
        self.alive = True

    async def kill(self) -> None:
        """A crash: the broker stops answering, its session expires, its controller dies with it."""
        assert self.session is not None and self.controller is not None
        self.cluster.transport.down.add(self.broker_id)
        controller = self.controller
        controller._stopped = True  # a dead process handles nothing more
        await self.cluster.backend.expire_session(self.session)
        await controller.stop()
        self.alive = False

    async def shutdown(self) -> None:
        assert self.session is not None and self.controller is not None
        await self.controller.stop()
        await self.session.close()
        self.cluster.transport.down.add(self.broker_id)
        self.alive = False


class SimCluster:
    def __init__(self, backend: Backend, config: Mapping[str, Any] | None = None, clock: Clock | None = None,
                 faults: StoreFaults | None = None) -> None:
        """``clock`` is the controllers' (each gets its own SystemClock by default); ``faults``, when given, sits
        between every controller and its session."""
        self.backend = backend
        self.clock = clock
        self.faults = faults
        self.transport = RecordingTransport()
        self.config = dict(config or {})
        self.brokers: dict[int, SimBroker] = {}
        self.admin: Session | None = None

    async def start(self, count: int, racks: list[str] | None = None) -> SimCluster:
        self.admin = await self.backend.session()
        await ensure_kafka_layout(self.admin)
        for broker_id in range(count):
            await self.add_broker(broker_id, racks[broker_id] if racks else None)
        await self.wait_controller()
        return self

    async def add_broker(self, broker_id: int, rack: str | None = None) -> SimBroker:
        broker = SimBroker(self, broker_id, rack, self.config)
        self.brokers[broker_id] = broker
        await broker.start()
        return broker

    async def restart(self, broker_id: int) -> None:
        await self.brokers[broker_id].start()

    def active(self) -> list[Controller]:
        return [b.controller for b in self.brokers.values()
                if b.alive and b.controller is not None and b.controller.is_active]

    async def wait_controller(self, not_on: int | None = None) -> Controller:
        def one() -> Controller | None:
            active = self.active()
            if len(active) == 1 and active[0].broker_id != not_on:
                return active[0]
            return None

        found: Controller = await wait_for(one, what="exactly one active controller")
        return found

    async def idle(self) -> None:
        for controller in self.active():
            await controller.wait_idle()

    async def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.controller is not None:
                await broker.controller.stop()
        await self.backend.close()

    # --------------------------------------------------------------------------- store helpers

    async def create_topic(self, topic: str, assignment: Mapping[int, list[int]],
                           config: Mapping[str, str] | None = None) -> None:
        assert self.admin is not None
        if config:
            await self.admin.create(topic_config_path(topic), TopicConfig(dict(config)).to_json(),
                                    make_parents=True)
        doc = TopicAssignment({p: tuple(r) for p, r in assignment.items()})
        await self.admin.create(topic_path(topic), doc.to_json(), make_parents=True)

    async def state(self, topic: str, partition: int) -> tuple[PartitionState, int] | None:
        assert self.admin is not None
        path = partition_state_path(topic, partition)
        if await self.admin.exists(path) is None:
            return None
        data, stat = await self.admin.get(path)
        return PartitionState.from_json(data, path), stat.version

    async def assignment(self, topic: str) -> TopicAssignment | None:
        assert self.admin is not None
        if await self.admin.exists(topic_path(topic)) is None:
            return None
        data, _ = await self.admin.get(topic_path(topic))
        return TopicAssignment.from_json(data, topic_path(topic))

    async def act_as_leader(self, topic: str, partition: int, isr: list[int]) -> None:
        """Write an ISR change as a partition leader does: compare-and-set, then a change notification."""
        assert self.admin is not None
        found = await self.state(topic, partition)
        assert found is not None
        state, version = found
        new = PartitionState(state.leader, state.leader_epoch, tuple(isr), state.controller_epoch)
        await self.admin.set(partition_state_path(topic, partition), new.to_json(), version)
        body = b'{"version":1,"partitions":[{"topic":"%s","partition":%d}]}' % (topic.encode(), partition)
        await self.admin.create("/isr_change_notification/isr_change_", body, sequential=True)
