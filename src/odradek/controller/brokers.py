"""Broker membership (seed 001 section 8.2.3, ``BrokerChangeListener``): brokers registering, dying and
restarting under ``/brokers/ids``, and what the controller does about each (``onBrokerStartup``,
``onBrokerFailure``).

A broker whose registration's czxid changed has restarted between two reads (bounced): it is handled as a failure
followed by a startup, as Kafka does. Each live broker's registration is watched as well
(``BrokerModificationsHandler``): one rewritten in place with other endpoints or features sends every broker new
metadata.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from odradek.controller.deletion import DeletionManager
from odradek.controller.events import BrokerChange, BrokerModification
from odradek.controller.machines import PartitionStateMachine, ReplicaStateMachine
from odradek.controller.reassignment import ReassignmentManager
from odradek.controller.shared import Shared
from odradek.controller.states import PartitionState, ReplicaState
from odradek.coordination.store import WatchCallback
from odradek.coordination.znodes import BrokerRegistration, Endpoint

log = logging.getLogger("odradek.controller")

P = PartitionState
R = ReplicaState

__all__ = ["BrokerManager"]


class BrokerManager:
    def __init__(self, shared: Shared, partitions: PartitionStateMachine, replicas: ReplicaStateMachine,
                 reassignment: ReassignmentManager, deletion: DeletionManager) -> None:
        self._shared = shared
        self._partitions = partitions
        self._replicas = replicas
        self._reassignment = reassignment
        self._deletion = deletion

    async def load(self) -> None:
        """Failover: every registered broker is live, and gets a channel."""
        shared = self._shared
        for broker_id, (registration, broker_epoch) in (
            await shared.store.brokers(shared.watch("brokers", BrokerChange))
        ).items():
            self._add_live(broker_id, registration, broker_epoch)
        await self._watch_registrations(shared.ctx.live_brokers)

    async def _watch_registrations(self, brokers: Iterable[int]) -> None:
        """Arm the watch on each ``/brokers/ids/{id}`` (Kafka's ``BrokerModificationsHandler``), every read sent
        before any answer is awaited; a registration rewritten since the broker list was read counts as modified."""
        await asyncio.gather(*(self.on_modification(b) for b in sorted(brokers)))

    def _modification_watch(self, broker_id: int) -> WatchCallback:
        return self._shared.watch(("broker", broker_id), lambda: BrokerModification(broker_id))

    async def on_modification(self, broker_id: int) -> None:
        """Kafka's ``processBrokerModification``: a live broker's registration rewritten in place with other
        endpoints or features means new metadata for every broker. A registration that is gone or belongs to a
        new incarnation (another broker epoch) is left to the broker change that its deletion brings."""
        shared = self._shared
        ctx = shared.ctx
        if broker_id not in ctx.live_brokers:
            return  # gone: not watched again until a broker change finds it back
        current = await shared.store.broker(broker_id, self._modification_watch(broker_id))
        old = ctx.live_brokers.get(broker_id)
        if current is None or old is None or current[1] != ctx.broker_epochs.get(broker_id):
            return
        registration = current[0]
        if registration.endpoints != old.endpoints or registration.features != old.features:
            log.info("controller %d: broker %d registration updated: %s", shared.broker_id, broker_id,
                     ",".join(map(str, registration.endpoints)))
            ctx.live_brokers[broker_id] = registration
            shared.batch.add_update_metadata(ctx.live_or_shutting_down, [])

    def _endpoint(self, registration: BrokerRegistration) -> Endpoint:
        listener = self._shared.config.listener
        for endpoint in registration.endpoints:
            if endpoint.listener == listener:
                return endpoint
        return registration.endpoints[0] if registration.endpoints else Endpoint(listener, "", -1)

    def _add_live(self, broker_id: int, registration: BrokerRegistration, broker_epoch: int) -> None:
        shared = self._shared
        shared.ctx.live_brokers[broker_id] = registration
        shared.ctx.broker_epochs[broker_id] = broker_epoch
        assert shared.channels is not None
        shared.channels.add_broker(broker_id, self._endpoint(registration))

    async def on_change(self) -> None:
        shared = self._shared
        ctx = shared.ctx
        current = await shared.store.brokers(shared.watch("brokers", BrokerChange))
        known = dict(ctx.broker_epochs)
        new = sorted(b for b in current if b not in known)
        dead = sorted(b for b in known if b not in current)
        bounced = sorted(b for b in current if b in known and current[b][1] != known[b])
        assert shared.channels is not None
        for broker in dead + bounced:
            ctx.live_brokers.pop(broker, None)
            ctx.replicas_on_offline_dirs.pop(broker, None)  # a restarted broker reports its failed dirs anew
            ctx.broker_epochs.pop(broker, None)
            shared.channels.remove_broker(broker)
        log.info("controller %d: brokers new %s, dead %s, bounced %s", shared.broker_id, new, dead, bounced)
        if dead or bounced:
            await self._on_failure(dead + bounced)
        for broker in new + bounced:
            registration, broker_epoch = current[broker]
            self._add_live(broker, registration, broker_epoch)
        await self._watch_registrations(new + bounced)
        if new or bounced:
            await self._on_startup(new + bounced)
        # A registration that changed in place (new endpoints) only needs new metadata.
        for broker, (registration, _epoch) in current.items():
            if broker in ctx.live_brokers and ctx.live_brokers[broker] != registration:
                ctx.live_brokers[broker] = registration
                shared.batch.add_update_metadata(ctx.live_or_shutting_down, [])

    async def _on_startup(self, brokers: list[int]) -> None:
        """Seed 001 section 8.2.3, ``onBrokerStartup``."""
        ctx = self._shared.ctx
        self._shared.batch.add_update_metadata(ctx.live_or_shutting_down, None)
        # Sent on its own, before any LeaderAndIsr, as Kafka's onBrokerStartup does: a Kafka broker takes a
        # follower's leader from its metadata cache, and refuses to follow one that cache does not list yet.
        await self._shared.send_batch()
        on_new = ctx.replicas_on(brokers)
        deleting = [r for r in on_new if ctx.is_queued_for_deletion(r.topic)]
        await self._replicas.to([r for r in on_new if not ctx.is_queued_for_deletion(r.topic)], R.ONLINE)
        await self._partitions.trigger_online()
        await self._reassignment.resume(
            [tp for tp, target in sorted(ctx.being_reassigned.items()) if any(b in target for b in brokers)])
        if deleting:
            await self._deletion.resume({r.topic for r in deleting})

    async def _on_failure(self, brokers: list[int]) -> None:
        """Seed 001 section 8.2.3, ``onBrokerFailure``."""
        ctx = self._shared.ctx
        dead = set(brokers)
        ctx.shutting_down -= dead
        without_leader = [
            tp for tp, s in ctx.leadership.items()
            if s.leader in dead and not ctx.is_queued_for_deletion(tp.topic)
        ]
        await self._partitions.to(without_leader, P.OFFLINE)
        await self._partitions.trigger_online()
        on_dead = ctx.replicas_on(dead)
        active = [r for r in on_dead if not ctx.is_queued_for_deletion(r.topic)]
        await self._replicas.to(active, R.OFFLINE)
        deleting = [r for r in on_dead if ctx.is_queued_for_deletion(r.topic)]
        if deleting:
            await self._deletion.fail_replica_deletion(deleting)
        if not without_leader:
            self._shared.batch.add_update_metadata(ctx.live_or_shutting_down, None)
