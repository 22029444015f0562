"""What a differential scenario is: plain data, the same for both brokers.

A scenario names one request (API key, version, body) and the setup steps that must run first (create a topic, produce
records, join a group...). Bodies are dicts in kio's field names; fields left out take kio's default or a neutral
value. Inside a body, the strings ``{topic}``, ``{group}`` and ``{txn}`` become names unique to the scenario, and a
:class:`Ref` takes a value a setup step captured on the same broker (a member id, a producer id), so a scenario reads
the same whichever broker runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Batch", "Call", "Closed", "Ref", "Scenario", "Topic", "Until"]


@dataclass(frozen=True)
class Ref:
    """A value captured by an earlier step of the same scenario on the same broker."""

    name: str


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
    body: Mapping[str, Any] = field(default_factory=dict)
    capture: Mapping[str, str] = field(default_factory=dict)
    until: Until | None = None


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


@dataclass(frozen=True)
class Scenario:
    name: str
    request: Call
    topics: tuple[Topic, ...] = ()
    setup: tuple[Call, ...] = ()
    raw: bytes | None = None
    """When set, these bytes are sent as the request body instead of encoding ``request.body`` (malformed input)."""
