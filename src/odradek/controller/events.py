"""What the controller's event queue carries: everything that can change the cluster, one at a time.

Watches, timers, channel responses, session expiry and API calls only create these and put them on the queue; the
controller's single loop handles each to the end before taking the next.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from odradek.controller.context import TopicPartition
from odradek.protocol.controller_requests import StopReplicaResponse

__all__ = [
    "ApiCall",
    "AutoRebalance",
    "BrokerChange",
    "BrokerModification",
    "ControllerChange",
    "EpochCheck",
    "Event",
    "Expire",
    "IsrChangeNotification",
    "LeaderAndIsrStorageErrors",
    "LogDirEventNotification",
    "PartitionModifications",
    "PreferredZnode",
    "ReassignmentIsrChange",
    "ReassignmentZnode",
    "Startup",
    "StopReplicaDone",
    "TopicChange",
    "TopicDeletion",
]


@dataclass(slots=True)
class Event:
    pass


@dataclass(slots=True)
class Startup(Event):
    pass


@dataclass(slots=True)
class ControllerChange(Event):
    pass


@dataclass(slots=True)
class Expire(Event):
    pass


@dataclass(slots=True)
class BrokerChange(Event):
    pass


@dataclass(slots=True)
class BrokerModification(Event):
    """``/brokers/ids/{broker}`` changed in place (Kafka's ``BrokerModifications``)."""

    broker: int


@dataclass(slots=True)
class TopicChange(Event):
    pass


@dataclass(slots=True)
class PartitionModifications(Event):
    topic: str


@dataclass(slots=True)
class TopicDeletion(Event):
    pass


@dataclass(slots=True)
class ReassignmentZnode(Event):
    pass


@dataclass(slots=True)
class ReassignmentIsrChange(Event):
    tp: TopicPartition


@dataclass(slots=True)
class IsrChangeNotification(Event):
    pass


@dataclass(slots=True)
class LogDirEventNotification(Event):
    pass


@dataclass(slots=True)
class LeaderAndIsrStorageErrors(Event):
    """A broker answered LeaderAndIsr with KAFKA_STORAGE_ERROR for these partitions: their log dir failed."""

    broker: int
    partitions: set[TopicPartition]


@dataclass(slots=True)
class PreferredZnode(Event):
    pass


@dataclass(slots=True)
class AutoRebalance(Event):
    pass


@dataclass(slots=True)
class EpochCheck(Event):
    """A broker answered STALE_CONTROLLER_EPOCH: somebody newer may be controller."""


@dataclass(slots=True)
class StopReplicaDone(Event):
    broker: int
    response: StopReplicaResponse
    partitions: list[TopicPartition]


@dataclass(slots=True)
class ApiCall(Event):
    call: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]
    needs_active: bool = True
