"""What the coordinator is asked: request values the API modules build from each version's request."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.group.metadata import Protocols


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """A JoinGroup, once decoded: every field the join path needs, passed down as one value."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols = ()
    """(name, metadata) in the member's order of preference."""
    require_known_member_id: bool = True
    """KIP-394 (v4+): a member without an id first gets MEMBER_ID_REQUIRED with one."""
    supports_skip_assignment: bool = False
    """KIP-814 (v9+): a static leader that rejoins a Stable group may skip the assignment."""
