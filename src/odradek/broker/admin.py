"""Where a broker's topic administration goes: its own files when alone, the coordination store in a cluster.

Both implement :class:`TopicAdmin`, so the CreateTopics, DeleteTopics, CreatePartitions and config handlers are
written once. A standalone broker is its own controller: it applies a change to its partitions at once. A clustered
broker writes Kafka's znodes (as AdminZkClient does) and waits until the controller's metadata reaches it.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Protocol

from odradek.broker.metadata import PartitionMeta, TopicMeta
from odradek.broker.topics import INTERNAL_TOPICS, TopicRecord, TopicStore
from odradek.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)


# How long an admin call waits for the cluster to apply its change when the request names no timeout (auto-creation,
# the offsets topic); requests that carry timeout_ms wait that long instead, and not at all when it is 0 or less.
ADMIN_WAIT_S = 30.0


class TopicAdmin(Protocol):
    async def topic_names(self) -> list[str]: ...

    async def topic_record(self, name: str) -> TopicRecord | None: ...

    async def create_topic(
        self, name: str, assignment: dict[int, list[int]], configs: dict[str, str], wait_s: float = ADMIN_WAIT_S
    ) -> TopicRecord:
        """Create the topic; then wait up to ``wait_s`` (0: not at all) for its partitions to be led."""
        ...

    async def delete_topic(self, name: str, wait_s: float = ADMIN_WAIT_S) -> None: ...

    async def add_partitions(
        self, name: str, new_assignment: dict[int, list[int]], wait_s: float = ADMIN_WAIT_S
    ) -> None: ...

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None: ...


class StandaloneAdmin:
    """Topics in ``topics.json``; every partition led by this broker with an ISR of itself."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.store = TopicStore(broker.data_dir)

    def load(self) -> str:
        self.store.load()
        return self.store.cluster_id

    def open_all(self) -> None:
        """Open every recorded topic; delete logs left behind by topics that no longer exist.

        A deletion interrupted after ``topics.json`` was saved but before every directory was gone leaves such
        logs; they must not come back as data of a future topic with the same name.
        """
        logs = self.broker.logs
        assert logs is not None
        for (topic, index), _plog in list(logs):
            record = self.store.topics.get(topic)
            if record is None or index not in record.assignment:
                log.warning("deleting stray log %s-%d: its topic or partition no longer exists", topic, index)
                logs.delete_partition(topic, index)
        for record in self.store.topics.values():
            self._open(record)

    async def topic_names(self) -> list[str]:
        return list(self.store.topics)

    async def topic_record(self, name: str) -> TopicRecord | None:
        return self.store.topics.get(name)

    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str],
                           wait_s: float = ADMIN_WAIT_S) -> TopicRecord:
        record = TopicRecord(name, uuid.uuid4(), assignment, dict(configs))
        self.store.topics[name] = record
        self.store.save()
        self._open(record)
        log.info("created topic %s with %d partitions, configs %s", name, len(assignment), configs or "{}")
        return record

    async def delete_topic(self, name: str, wait_s: float = ADMIN_WAIT_S) -> None:
        if not self.broker.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        record = self.store.topics.pop(name, None)
        if record is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        self.store.save()
        self.broker.metadata.remove_topic(name)
        for index in record.assignment:
            self.broker.drop_partition(name, index, delete=True)
        await self.broker.groups.remove_offsets_for_topics([name])
        log.info("deleted topic %s and its data", name)

    async def add_partitions(self, name: str, new_assignment: dict[int, list[int]],
                             wait_s: float = ADMIN_WAIT_S) -> None:
        record = self.store.topics[name]
        record.assignment.update(new_assignment)
        self.store.save()
        self._open(record)

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        record = self.store.topics[name]
        record.configs = dict(configs)
        self.store.save()
        self.broker.apply_topic_config(name, configs)

    def _open(self, record: TopicRecord) -> None:
        broker = self.broker
        partitions: dict[int, PartitionMeta] = {}
        for index, replicas in sorted(record.assignment.items()):
            part = broker.open_partition(record.name, index, record.configs)
            epoch = max(part.leader_epoch + 1, part.log.latest_epoch + 1)
            part.make_leader(epoch, replicas, [broker.broker_id])
            broker.on_leadership(part)
            partitions[index] = PartitionMeta(index, broker.broker_id, epoch, list(replicas), [broker.broker_id])
        broker.metadata.set_topic(
            TopicMeta(record.name, record.topic_id, partitions, internal=record.name in INTERNAL_TOPICS)
        )
