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


def _invalid_reason(name: str) -> str | None:
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    if not _LEGAL.match(name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def validate_topic_name(name: str) -> None:
    """Kafka 3.9's Topic.validate: the same messages (``Topic name is invalid: <reason>``), so users recognise them,
    and kafka-topics prints what it prints against Kafka."""
    if (reason := _invalid_reason(name)) is not None:
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
