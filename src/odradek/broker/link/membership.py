"""The broker's membership: its coordination session and its ephemeral registration under ``/brokers/ids``.

The registration's czxid is the *broker epoch* the controller stamps on its requests. When the session expires
(ZooKeeper declared us dead: the controller has already moved our leaderships away) a new session is opened and
the broker registers again with a new epoch, as Kafka's ``KafkaZkClient`` does; parts that keep watches on the
session (the config-change watch) are told through :meth:`Membership.on_registered`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from odradek.broker.faults import FaultState
from odradek.broker.topics import new_cluster_id
from odradek.clock import Clock
from odradek.coordination import Backend, NodeExistsError, NoNodeError, Session, SessionState
from odradek.coordination import znodes as zn
from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

KAFKA_PATHS = (zn.BROKER_IDS, zn.TOPICS, zn.DELETE_TOPICS, zn.CONFIG_TOPICS, zn.CONFIG_CHANGES,
               zn.ISR_CHANGE_NOTIFICATION, zn.BROKER_SEQID)


@dataclass(frozen=True, slots=True)
class Registration:
    """What the broker publishes about itself in ``/brokers/ids/{id}``."""

    broker_id: int
    host: str
    port: int
    rack: str | None
    http_port: int = -1
    """The metrics and console HTTP server's port (-1: none)."""
    endpoints: tuple[zn.Endpoint, ...] = ()
    """Every advertised listener (empty: one PLAINTEXT endpoint at ``host``/``port``)."""
    protocol_map: Mapping[str, str] = field(default_factory=dict)
    """Each advertised listener's security protocol, as Kafka writes ``listener_security_protocol_map``."""


class Membership:
    def __init__(self, backend: Backend, broker_id: int, session_timeout_ms: int, clock: Clock,
                 faults: FaultState) -> None:
        self.backend = backend
        self.broker_id = broker_id
        self.session_timeout_ms = session_timeout_ms
        self.clock = clock
        self.faults = faults
        self.session: Session | None = None
        self.broker_epoch = -1
        self._registration: Registration | None = None
        self._registered_listeners: list[Callable[[], Awaitable[None]]] = []
        self._session_lost = asyncio.Event()
        self._keeper: asyncio.Task[None] | None = None
        self._stopping = False

    def on_registered(self, listener: Callable[[], Awaitable[None]]) -> None:
        """Run ``listener`` after every registration, the first and each one after a session expiry."""
        self._registered_listeners.append(listener)

    def current(self) -> Session:
        if self.session is None:
            raise KafkaError(ErrorCode.broker_not_available, f"broker {self.broker_id} has no coordination session")
        return self.session

    async def current_session(self) -> Session:
        """The live session, waiting while a new one is being opened (the controller's session source)."""
        while self.session is None or self.session.state is SessionState.EXPIRED:
            await asyncio.sleep(0.05)
        return self.session

    async def connect(self) -> str:
        """Open the session, make Kafka's top-level paths and return the cluster id (creating it the first time)."""
        self.session = await self._new_session()
        for path in KAFKA_PATHS:
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
        session = await self.backend.session(self.session_timeout_ms)
        session.add_listener(self._on_session_state)
        return session

    def _on_session_state(self, state: SessionState) -> None:
        if state is SessionState.EXPIRED and not self._stopping:
            log.warning("broker %d: coordination session expired; registering again", self.broker_id)
            self._session_lost.set()

    async def register(self, registration: Registration) -> None:
        """Create ``/brokers/ids/{id}`` and keep it: registering again whenever the session is lost."""
        self._registration = registration
        await self._register()
        self._keeper = asyncio.create_task(self._keep_registered(), name=f"broker-{self.broker_id}-session")

    def _znode(self) -> zn.BrokerRegistration:
        reg = self._registration
        assert reg is not None
        return zn.BrokerRegistration(
            broker_id=reg.broker_id,
            endpoints=reg.endpoints or (zn.Endpoint("PLAINTEXT", reg.host, reg.port),),
            listener_security_protocol_map=dict(reg.protocol_map) or {"PLAINTEXT": "PLAINTEXT"},
            rack=reg.rack,
            timestamp=self.clock.now_ms(),
            http_port=reg.http_port,
        )

    async def update_registration(self, registration: Registration) -> None:
        """New endpoints (a dynamic ``advertised.listeners``): ``/brokers/ids/{id}`` rewritten in place, as Kafka's
        updateBrokerInfo does, keeping the broker epoch."""
        self._registration = registration
        if self.session is not None and self.broker_epoch >= 0:
            await self.current().set(zn.broker_path(registration.broker_id), self._znode().to_json())
            log.info("broker %d: registration updated (%s)", registration.broker_id,
                     ",".join(map(str, registration.endpoints)))

    async def _register(self) -> None:
        session = self.current()
        registration = self._znode()
        path = zn.broker_path(registration.broker_id)
        deadline = asyncio.get_running_loop().time() + session.timeout_ms / 1000 * 2 + 5
        while True:
            try:
                await session.create(path, registration.to_json(), ephemeral=True)
                break
            except NodeExistsError:
                # our previous incarnation's session still holds it until ZooKeeper expires that session
                if asyncio.get_running_loop().time() > deadline:
                    raise KafkaError(ErrorCode.broker_id_not_registered,
                                     f"broker id {registration.broker_id} is in use") from None
                await asyncio.sleep(0.2)
        stat = await session.exists(path)
        assert stat is not None
        self.broker_epoch = stat.czxid
        log.info("broker %d registered at %s (broker epoch %d)", registration.broker_id, path, self.broker_epoch)
        for listener in self._registered_listeners:
            await listener()

    async def _keep_registered(self) -> None:
        while not self._stopping:
            await self._session_lost.wait()
            await self.faults.resumed.wait()  # a paused broker notices its lost session when it runs again
            self._session_lost.clear()
            if self._stopping:
                return
            try:
                self.session = await self._new_session()
                await self._register()
            except Exception:
                log.exception("broker %d could not register again; retrying", self.broker_id)
                await asyncio.sleep(1)
                self._session_lost.set()

    async def abandon(self) -> None:
        """Stop keeping the registration but leave the session to expire on its own (a crash)."""
        self._stopping = True
        self._session_lost.set()
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)

    async def close(self) -> None:
        """Leave the cluster cleanly: closing the session removes the registration at once."""
        await self.abandon()
        if self.session is not None:
            with contextlib.suppress(Exception):
                await self.session.close()
