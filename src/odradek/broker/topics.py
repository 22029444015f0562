"""Topic names as Kafka validates them, a topic's record as admin requests see it, and cluster and topic ids.

The records themselves live in the coordination store under Kafka's znode layout (:mod:`odradek.coordination.znodes`).
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from dataclasses import dataclass, field

from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate (3.9): the same messages, so users recognise them."""
    reason = None
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif not _LEGAL.match(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    if reason is not None:
        raise KafkaError(ErrorCode.invalid_topic_exception, f"Topic name is invalid: {reason}")


def collision_key(name: str) -> str:
    """Metric names replace '.' with '_', so Kafka refuses topics that differ only there."""
    return name.replace(".", "_")


@dataclass(slots=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]
    configs: dict[str, str] = field(default_factory=dict)


def new_cluster_id() -> str:
    """Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def fallback_topic_id(cluster_id: str, topic: str) -> uuid.UUID:
    """A topic created without an id (by an older tool) gets one that every broker derives alike."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"odradek:{cluster_id}:{topic}")
