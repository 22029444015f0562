"""What a differential scenario is: plain data, the same for both brokers.

A scenario names one request (API key, version, body) and the setup steps that must run first (create a topic, produce
records, join a group...). Bodies are dicts in kio's field names; fields left out take kio's default or a neutral
value. Inside a body, the strings ``{topic}``, ``{group}`` and ``{txn}`` become names unique to the scenario
(``{broker}`` the broker's own node id), and a
:class:`Ref` takes a value a setup step captured on the same broker (a member id, a producer id), so a scenario reads
the same whichever broker runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Act", "Batch", "Call", "Closed", "Derived", "Ref", "Scenario", "Topic", "Until", "coordinator",
           "init_producer", "produce"]


@dataclass(frozen=True)
class Ref:
    """A value captured by an earlier step of the same scenario on the same broker."""

    name: str


@dataclass(frozen=True)
class Derived:
    """A value computed from one captured earlier on the same broker (a SCRAM client-final message carrying the
    server's nonce)."""

    name: str
    compute: Callable[[Any], Any]


@dataclass(frozen=True)
class Batch:
    """A v2 RecordBatch built when the scenario runs (its CRC then covers what it holds); ``corrupt_crc`` flips a
    bit of the stored CRC, ``magic`` overrides the magic byte (after the CRC is computed, as a broken client would)."""

    values: tuple[bytes | None, ...] = (b"v",)
    keys: tuple[bytes | None, ...] | None = None
    producer_id: int | Ref = -1
    producer_epoch: int | Ref = -1
    base_sequence: int = -1
    transactional: bool = False
    compression: int = 0
    timestamp_ms: int = 1_700_000_000_000
    corrupt_crc: bool = False
    magic: int | None = None
    truncate: int = 0
    """Drop this many bytes from the end of the last copy (a batch cut short)."""
    repeat: int = 1
    """Concatenate this many copies of the batch (each its own batch, for out-of-order sequences)."""


Until = Callable[[Any], bool]
"""A setup step's condition on its response: the step is repeated (to a deadline) until it holds."""


@dataclass(frozen=True)
class Call:
    """One request. ``capture`` maps a name to a dotted path in the response (``member_id``, ``producer_id``) for
    later :class:`Ref` s; ``until`` makes a setup step poll."""

    api_key: int
    version: int
    body: Any = field(default_factory=dict)
    """A dict in kio's field names; for the controller's APIs (4-7, which kio lacks) a request of
    :mod:`odradek.protocol.controller_requests`."""
    capture: Mapping[str, str] = field(default_factory=dict)
    until: Until | None = None
    to: int | str | None = None
    """Where it goes on a cluster: a broker id, ``"controller"`` (the active controller, asked of the first broker
    with Metadata), ``"not-controller"`` (the lowest other id), a login's name on a secured broker, or None for the
    target's own broker."""


@dataclass(frozen=True)
class Act:
    """A setup step that changes the cluster itself, done alike on both: ``stop`` a broker (SIGTERM, a controlled
    shutdown) or ``start`` it again. A broker a scenario leaves stopped is started again after it."""

    verb: str
    broker: int


@dataclass(frozen=True)
class Closed:
    """The answer when the broker closes the connection instead of responding (both brokers must agree on it)."""


@dataclass(frozen=True)
class Topic:
    """A topic created (and waited for until its partitions have leaders) before the scenario's request."""

    partitions: int = 1
    configs: Mapping[str, str] = field(default_factory=dict)
    suffix: str = ""
    """Extra topics of one scenario are ``{topic}`` plus a suffix."""
    replicas: tuple[tuple[int, ...], ...] = ()
    """On a cluster: each partition's replicas (the first the preferred leader), instead of ``partitions`` and a
    replication factor of one; the topic is ready once every broker sees each partition's whole ISR."""


@dataclass(frozen=True)
class Scenario:
    name: str
    request: Call
    topics: tuple[Topic, ...] = ()
    setup: tuple[Call | Act, ...] = ()
    against: str = "3.9"
    """The Apache Kafka it is compared with: "4" for APIs Kafka 3.9 in ZooKeeper mode does not serve."""
    own: str = ""
    """A dotted path to a list in the response that holds the whole cluster's entries (all groups, all
    transactions): only the entries naming this scenario's topic, group or transactional id are compared."""
    raw: bytes | None = None
    """When set, these bytes are sent as the request body instead of encoding ``request.body`` (malformed input)."""


# ---------------------------------------------------------------------------------------------- common steps


def produce(batch: Batch | None = None, *, version: int = 9, partition: int = 0, acks: int = -1,
            topic: str = "{topic}", transactional_id: str | None = None) -> Call:
    """Produce one batch (default: one record ``v``) to a partition of the scenario's topic."""
    return Call(0, version, {"transactional_id": transactional_id, "acks": acks, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": batch or Batch()}]}]})


def coordinator(key: str, key_type: int = 0) -> Call:
    """Wait until the group (0) or transaction (1) coordinator for ``key`` answers (its internal topic exists)."""
    return Call(10, 3, {"key": key, "key_type": key_type}, until=lambda r: r["error_code"] == 0)


def init_producer(transactional_id: str | None = None, *, prefix: str = "") -> Call:
    """InitProducerId (v3), capturing ``{prefix}pid`` and ``{prefix}epoch``."""
    return Call(22, 3, {"transactional_id": transactional_id, "transaction_timeout": 60000, "producer_id": -1,
                        "producer_epoch": -1},
                capture={f"{prefix}pid": "producer_id", f"{prefix}epoch": "producer_epoch"},
                until=lambda r: r["error_code"] == 0)
