"""Exceptions named after the Kafka exceptions the same inputs raise there.

Callers (controller, admin API, CLI) map these to Kafka error codes, so the names must stay Kafka's.
"""

from __future__ import annotations

__all__ = [
    "AdminOperationException",
    "InvalidPartitionsException",
    "InvalidReplicaAssignmentException",
    "InvalidReplicationFactorException",
    "PlacementError",
]


class PlacementError(Exception):
    """Base of every error raised by :mod:`odradek.placement`."""


class InvalidPartitionsException(PlacementError):
    """Kafka's ``InvalidPartitionsException`` (error code INVALID_PARTITIONS)."""


class InvalidReplicationFactorException(PlacementError):
    """Kafka's ``InvalidReplicationFactorException`` (error code INVALID_REPLICATION_FACTOR)."""


class InvalidReplicaAssignmentException(PlacementError):
    """Kafka's ``InvalidReplicaAssignmentException`` (error code INVALID_REPLICA_ASSIGNMENT)."""


class AdminOperationException(PlacementError):
    """Kafka's ``AdminOperationException`` (partial rack information and similar admin misuse)."""
