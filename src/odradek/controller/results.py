"""The answers the controller's API calls give (ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments), kept apart so every manager can return them without importing the controller.

Seed 001 predates these APIs (it drives elections and reassignments through znodes only); the shapes are Kafka's
KIP-460 and KIP-455 answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.errors import ErrorCode

__all__ = ["ELECTION_NOT_NEEDED", "NO_SUCH_PARTITION", "PREFERRED", "UNCLEAN", "PartitionResult", "ReassignmentState"]

PREFERRED = 0
"""ElectLeaders ``election_type`` values, as in Kafka's ``ElectionType``."""
UNCLEAN = 1

ELECTION_NOT_NEEDED = "Leader election not needed for topic partition."
"""Kafka's messages for these ElectLeaders answers (its ``Errors`` default and KafkaController's own), which admin
clients print."""
NO_SUCH_PARTITION = "The partition does not exist."


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """One partition's answer to ElectLeaders or AlterPartitionReassignments: a Kafka error code and message."""

    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ReassignmentState:
    """ListPartitionReassignments' answer for one partition."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
