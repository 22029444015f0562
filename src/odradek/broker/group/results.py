"""What the coordinator answers: plain values the API modules turn into each version's response."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.errors import ErrorCode

NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()
    """(member_id, group_instance_id, metadata) for the leader; empty for everyone else."""
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


def join_error(member_id: str, error: ErrorCode) -> JoinResult:
    return JoinResult(error=error, member_id=member_id)
