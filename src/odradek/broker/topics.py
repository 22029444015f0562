"""Topic names and the durable topic records of a standalone broker.

A broker that runs alone keeps its topic list (ids, replica assignment, config overrides) in ``topics.json`` in its
data directory, written atomically, so a restart comes back with the same topics, ids and configs. In a cluster
the same records live in the coordination store under Kafka's znode layout.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from odradek.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: the same messages, so users recognise them."""
    if not name:
        raise KafkaError(ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' "
            "and '-'",
        )


def collision_key(name: str) -> str:
    """Metric names replace '.' with '_', so Kafka refuses topics that differ only there."""
    return name.replace(".", "_")


@dataclass(slots=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]
    configs: dict[str, str] = field(default_factory=dict)


class TopicStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "topics.json"
        self.topics: dict[str, TopicRecord] = {}
        self.cluster_id = ""

    def load(self) -> None:
        if not self.path.exists():
            self.cluster_id = new_cluster_id()
            self.save()
            return
        doc = json.loads(self.path.read_text())
        self.cluster_id = doc["cluster_id"]
        for name, t in doc["topics"].items():
            self.topics[name] = TopicRecord(
                name=name,
                topic_id=uuid.UUID(t["topic_id"]),
                assignment={int(p): list(r) for p, r in t["partitions"].items()},
                configs=dict(t.get("configs", {})),
            )

    def save(self) -> None:
        doc = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "topics": {
                t.name: {
                    "topic_id": str(t.topic_id),
                    "partitions": {str(p): r for p, r in sorted(t.assignment.items())},
                    "configs": t.configs,
                }
                for t in self.topics.values()
            },
        }
        tmp = self.path.with_suffix(".json.tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def new_cluster_id() -> str:
    """Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding (22 characters)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
