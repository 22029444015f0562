"""A cluster of simulated brokers around real controllers on a real coordination store.

Only the brokers' network side is played: :class:`RecordingTransport` records every controller request and answers
as a broker would (success, or STALE_CONTROLLER_EPOCH to a controller older than one it has heard from). Each
:class:`SimBroker` registers ``/brokers/ids/{id}`` with its own session and runs a real :class:`Controller`; the
store is the embedded backend (or real ZooKeeper), so elections, watches, fencing and session expiry are real.
:class:`StoreFaults` makes chosen writes of the controllers fail, to see what a refused write leaves behind, and
:class:`ConnectionLosses` cuts a controller's session at its Nth request, to see what a cut leaves behind.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.clock import Clock, SystemClock
from odradek.controller import Controller
from odradek.coordination import (
    ANY_VERSION,
    Backend,
    ConnectionLossError,
    CoordinationError,
    Create,
    Delete,
    EmbeddedBackend,
    ForwardingSession,
    Op,
    OpResult,
    Session,
    SetData,
    Stat,
)
from odradek.coordination.store import WatchCallback
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


class ConnectionLosses:
    """Cuts chosen brokers' sessions at their Nth store request from :meth:`arm` on (every call on the session is
    one request; a pipelined call is one), as a dropped TCP connection to ZooKeeper would: the embedded store
    suspends the session, so that request (and any other sent meanwhile) fails with connection loss, and the
    session reconnects on the next turn of the loop, in time.

    ``after`` chooses which half of a request the cut takes: False, the request never reaches the store; True, the
    store applies it and its reply is lost, so whoever sends it again finds it already done."""

    def __init__(self, backend: EmbeddedBackend) -> None:
        self.backend = backend
        self.after = False
        self.hold = False
        """True: a cut lasts until the test resumes the session (or expires it)."""
        self._left: dict[int, int] = {}
        self.fired: list[tuple[int, str]] = []
        """(broker, request) of each cut made."""

    def arm(self, at: int, brokers: Iterable[int], after: bool) -> None:
        self.after = after
        self._left = dict.fromkeys(brokers, at)

    def is_cut_here(self, broker_id: int, request: str) -> bool:
        left = self._left.get(broker_id)
        if left is None:
            return False
        if left > 1:
            self._left[broker_id] = left - 1
            return False
        del self._left[broker_id]
        self.fired.append((broker_id, request))
        return True

    def cut(self, session: Session) -> None:
        self.backend.suspend(session.session_id)
        if not self.hold:
            asyncio.get_running_loop().call_soon(self.backend.resume, session.session_id)


class LossySession(ForwardingSession):
    """A broker's embedded session with :class:`ConnectionLosses` between it and the broker's controller."""

    def __init__(self, session: Session, broker_id: int, losses: ConnectionLosses) -> None:
        super().__init__(session)
        self._broker_id = broker_id
        self._losses = losses

    async def _request(self, name: str, call: Callable[[], Awaitable[Any]], lost: Callable[[], Any]) -> Any:
        """``call``, unless this is the request to cut: then the session is cut before it or after it, and the
        reply is ``lost()`` (raised when it is an exception)."""
        losses = self._losses
        if not losses.is_cut_here(self._broker_id, name):
            return await call()
        if not losses.after:
            losses.cut(self.inner)
            return await call()  # the suspended session answers with connection loss
        await call()
        losses.cut(self.inner)
        reply = lost()
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def _lost_one(self) -> ConnectionLossError:
        return ConnectionLossError(None, "injected connection loss")

    def _lost_each(self, items: Sequence[Any]) -> Callable[[], list[ConnectionLossError]]:
        return lambda: [self._lost_one() for _ in items]

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False,
                     make_parents: bool = False) -> str:
        return await self._request("create", lambda: self.inner.create(
            path, data, ephemeral=ephemeral, sequential=sequential, make_parents=make_parents), self._lost_one)

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        return await self._request("get", lambda: self.inner.get(path, watch), self._lost_one)

    async def set(self, path: str, data: bytes, expected_version: int = ANY_VERSION) -> Stat:
        return await self._request("set", lambda: self.inner.set(path, data, expected_version), self._lost_one)

    async def delete(self, path: str, expected_version: int = ANY_VERSION) -> None:
        await self._request("delete", lambda: self.inner.delete(path, expected_version), self._lost_one)

    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        return await self._request("children", lambda: self.inner.children(path, watch), self._lost_one)

    async def children_with_stat(self, path: str, watch: WatchCallback | None = None) -> tuple[list[str], Stat]:
        return await self._request("children", lambda: self.inner.children_with_stat(path, watch),
                                   self._lost_one)

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        return await self._request("exists", lambda: self.inner.exists(path, watch), self._lost_one)

    async def multi(self, ops: Sequence[Op]) -> list[OpResult]:
        return await self._request("multi", lambda: self.inner.multi(ops), self._lost_one)

    async def create_many(self, items: Sequence[Create]) -> list[str | CoordinationError]:
        return await self._request("create_many", lambda: self.inner.create_many(items), self._lost_each(items))

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | CoordinationError]:
        return await self._request("get_many", lambda: self.inner.get_many(paths), self._lost_each(paths))

    async def set_many(self, items: Sequence[SetData]) -> list[Stat | CoordinationError]:
        return await self._request("set_many", lambda: self.inner.set_many(items), self._lost_each(items))

    async def delete_many(self, items: Sequence[Delete]) -> list[CoordinationError | None]:
        return await self._request("delete_many", lambda: self.inner.delete_many(items), self._lost_each(items))


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
        faults, losses = self.cluster.faults, self.cluster.losses
        if faults is None and losses is None:
            return self.session
        if self._wrapped is None or self._wrapped[0] is not self.session:
            wrapped: Any = self.session
            if losses is not None:
                wrapped = LossySession(wrapped, self.broker_id, losses)
            if faults is not None:
                wrapped = FaultySession(wrapped, faults)
            self._wrapped = (self.session, wrapped)
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
                 faults: StoreFaults | None = None, losses: ConnectionLosses | None = None) -> None:
        """``clock`` is the controllers' (each gets its own SystemClock by default); ``faults`` and ``losses``,
        when given, sit between every controller and its session."""
        self.backend = backend
        self.clock = clock
        self.faults = faults
        self.losses = losses
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
