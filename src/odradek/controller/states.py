"""The partition and replica state machines' states and their tables of valid previous states.

Kept pure: :class:`StateTable` only answers "may X go to Y" and remembers where everything is; the controller asks
it before acting and, when it says no, acts on nothing. Refusals go to the ``state.change.logger`` logger, the name
Kafka's brokers log state changes under, so operators can grep for the same thing.

The tables are seed 001's (sections 4.1 and 5), with one change taken from Kafka 2.x: a replica may become
``REPLICA_DELETION_INELIGIBLE`` straight from ``OFFLINE``. Seed 001's own ``startReplicaDeletion`` moves the replicas
of a dead broker there from ``OFFLINE``, which its older table would refuse.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Generic, TypeVar

__all__ = [
    "PARTITION_VALID_PREVIOUS",
    "REPLICA_VALID_PREVIOUS",
    "PartitionState",
    "ReplicaState",
    "StateTable",
    "state_change_log",
]

state_change_log = logging.getLogger("state.change.logger")


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaState(enum.Enum):
    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


P = PartitionState
R = ReplicaState

PARTITION_VALID_PREVIOUS: Mapping[PartitionState, frozenset[PartitionState]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}

REPLICA_VALID_PREVIOUS: Mapping[ReplicaState, frozenset[ReplicaState]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}

K = TypeVar("K", bound=Hashable)
S = TypeVar("S", PartitionState, ReplicaState)


class StateTable(Generic[K, S]):
    """Where every partition (or replica) is; unknown keys are in ``initial`` (NonExistent)."""

    def __init__(self, kind: str, valid_previous: Mapping[S, frozenset[S]], initial: S) -> None:
        self.kind = kind
        self._valid: Mapping[S, frozenset[S]] = valid_previous
        self._initial: S = initial
        self._states: dict[K, S] = {}
        self.controller_id = -1
        self.epoch = 0
        self.on_change: Callable[[K, S, S], None] | None = None
        """Told of every transition (not of :meth:`load`): the console's ring of recent state changes."""

    def get(self, key: K) -> S:
        return self._states.get(key, self._initial)

    def put(self, key: K, state: S) -> None:
        """Set a state without checking (the machines have checked it)."""
        if self.on_change is not None:
            self.on_change(key, self._states.get(key, self._initial), state)
        self.load(key, state)

    def load(self, key: K, state: S) -> None:
        """Set a state as the store holds it (failover start-up): not a transition, so nobody is told."""
        if state is self._initial:
            self._states.pop(key, None)
        else:
            self._states[key] = state

    def remove(self, key: K) -> None:
        if self.on_change is not None and key in self._states:
            self.on_change(key, self._states[key], self._initial)
        self._states.pop(key, None)

    def clear(self) -> None:
        self._states.clear()

    def may(self, key: K, target: S) -> bool:
        return self.get(key) in self._valid[target]

    def split(self, keys: Iterable[K], target: S) -> tuple[list[K], list[K]]:
        """(keys that may move to ``target``, keys that may not); the refusals are logged."""
        valid: list[K] = []
        invalid: list[K] = []
        for key in keys:
            (valid if self.may(key, target) else invalid).append(key)
        for key in invalid:
            self.log_refusal(key, target)
        return valid, invalid

    def log_refusal(self, key: K, target: S) -> None:
        state_change_log.error(
            "[Controller id=%d epoch=%d] %s %s: illegal state transition from %s to %s; valid previous states "
            "are %s",
            self.controller_id, self.epoch, self.kind, key, self.get(key).value, target.value,
            sorted(s.value for s in self._valid[target]),
        )

    def move(self, key: K, target: S) -> bool:
        """Check and record one transition; False (and a log line) when it is illegal."""
        if not self.may(key, target):
            self.log_refusal(key, target)
            return False
        self.put(key, target)
        return True

    def in_state(self, *states: S) -> list[K]:
        wanted = set(states)
        return [k for k, s in self._states.items() if s in wanted]

    def items(self) -> list[tuple[K, S]]:
        return list(self._states.items())
