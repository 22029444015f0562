"""The Kafka controller of the ZooKeeper era (seed 001), with one event queue and pure decisions.

Handlers decide a :class:`~odradek.controller.plan.Plan` from the context; one
:class:`~odradek.controller.applier.Applier` writes it (fenced) and only then commits it to the context and the
brokers' request batch, so a refused write never leaves the controller believing something the store does not hold.

Every broker runs one :class:`Controller`; exactly one is active at a time. Public surface for the broker::

    controller = Controller(broker_id, session_or_factory, clock, transport, config)
    await controller.start()        # joins the election; runs the event loop, and the controller when elected
    controller.is_active            # this broker is the controller
    controller.epoch                # its controller epoch while active (0 otherwise)
    await controller.elect_leaders([("t", 0)], PREFERRED | UNCLEAN)   # ElectLeaders -> {tp: PartitionResult}
    await controller.alter_partition_reassignments({("t", 0): [1, 2, 3], ("t", 1): None})  # None cancels
    await controller.list_partition_reassignments()                    # {tp: ReassignmentState}
    await controller.controlled_shutdown(broker_id, broker_epoch)      # -> partitions it still leads
    await controller.stop()

``session_or_factory`` is the broker's coordination :class:`~odradek.coordination.Session` (the one that holds its
``/brokers/ids/{id}`` registration), or an ``async`` callable returning the broker's *current* session; with a
callable the controller rejoins the election after its session expires, with a bare session it stays out. The
controller never closes the session. The API methods raise :class:`~odradek.errors.KafkaError` with
``NOT_CONTROLLER`` on a broker that is not the controller, so the broker's API handlers can answer with that code.

``transport`` is anything with ``async send(broker_id, endpoint, api_key, body) -> response body``;
:class:`TcpTransport` is the real one. Requests and their encoding are in :mod:`odradek.protocol.controller_requests`.

Config keys read (Kafka's names and defaults): ``unclean.leader.election.enable`` (false; a topic's
``/config/topics/{topic}`` overrides it), ``delete.topic.enable`` (true), ``auto.leader.rebalance.enable`` (true),
``leader.imbalance.per.broker.percentage`` (10), ``leader.imbalance.check.interval.seconds`` (300, fractions
allowed), ``controller.socket.timeout.ms`` (30000), ``retry.backoff.ms`` (100), ``inter.broker.listener.name``
(PLAINTEXT: the endpoint the controller connects to).
"""

from odradek.controller.channels import ChannelManager, Transport
from odradek.controller.context import ControllerContext, LeaderIsr, PartitionReplica, ReplicaAssignment
from odradek.controller.controller import Controller
from odradek.controller.results import PREFERRED, UNCLEAN, PartitionResult, ReassignmentState
from odradek.controller.states import PartitionState, ReplicaState
from odradek.controller.transport import TcpTransport, request_controlled_shutdown
from odradek.controller.zkstore import ControllerMovedError
from odradek.protocol.controller_requests import (
    CONTROLLED_SHUTDOWN,
    CONTROLLER_API_KEYS,
    LEADER_AND_ISR,
    LEADER_DURING_DELETE,
    STOP_REPLICA,
    UPDATE_METADATA,
)

__all__ = [
    "CONTROLLED_SHUTDOWN",
    "CONTROLLER_API_KEYS",
    "LEADER_AND_ISR",
    "LEADER_DURING_DELETE",
    "PREFERRED",
    "STOP_REPLICA",
    "UNCLEAN",
    "UPDATE_METADATA",
    "ChannelManager",
    "Controller",
    "ControllerContext",
    "ControllerMovedError",
    "LeaderIsr",
    "PartitionReplica",
    "PartitionResult",
    "PartitionState",
    "ReassignmentState",
    "ReplicaAssignment",
    "ReplicaState",
    "TcpTransport",
    "Transport",
    "request_controlled_shutdown",
]
