"""Topic administration as Kafka's AdminZkClient does it: validate, write the znodes, wait for the controller.

CreateTopics, DeleteTopics, CreatePartitions and the config APIs (and auto-creation, and the offsets topic) all come
here, on every broker and in a cluster of one alike. Validation follows Kafka's order and messages; placement is
Kafka's rack-aware assignment (:mod:`odradek.placement`) over the brokers the metadata knows. A change is written
to the store, and the answer waits (within the request's ``timeout_ms``) until the controller's metadata reached
this broker: REQUEST_TIMED_OUT past it, the change still standing, as Kafka answers.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from odradek.broker.config import BrokerConfig
from odradek.broker.group.config import OFFSETS_TOPIC
from odradek.broker.link.membership import Membership
from odradek.broker.metadata import MetadataCache
from odradek.broker.topic_config import validate_overrides
from odradek.broker.topics import TopicRecord, collision_key, fallback_topic_id, validate_topic_name
from odradek.broker.txn.config import TRANSACTION_STATE_TOPIC
from odradek.coordination import BadVersionError, NodeExistsError, NoNodeError
from odradek.coordination import znodes as zn
from odradek.errors import ErrorCode, KafkaError
from odradek.placement import BrokerMetadata, assign_replicas_to_brokers

log = logging.getLogger(__name__)

# How long an admin call waits for the cluster to apply its change when the request names no timeout (auto-creation,
# the offsets topic); requests that carry timeout_ms wait that long instead, and not at all when it is 0 or less.
ADMIN_WAIT_S = 30.0
MAX_PARTITIONS_PER_REQUEST = 100_000  # a bound so one request cannot exhaust memory; Kafka has none


class TopicAdmin:
    def __init__(self, membership: Membership, metadata: MetadataCache, config: BrokerConfig) -> None:
        self.membership = membership
        self.metadata = metadata
        self.config = config

    # --- reads -------------------------------------------------------------------------------------------------

    async def topic_names(self) -> list[str]:
        return await self.membership.current().children(zn.TOPICS)

    async def topic_record(self, name: str) -> TopicRecord | None:
        """The topic as the store has it; None for a topic that does not exist or could not (an illegal name)."""
        if not _is_topic_name(name):
            return None
        session = self.membership.current()
        try:
            data, _ = await session.get(zn.topic_path(name))
        except NoNodeError:
            return None
        assignment = zn.decode_or_skip(zn.TopicAssignment.from_json, data, zn.topic_path(name))
        if assignment is None:
            return None
        configs = await zn.read_topic_configs(session, [name])
        topic_id = uuid.UUID(assignment.topic_id) if assignment.topic_id else fallback_topic_id(
            self.metadata.cluster_id, name)
        return TopicRecord(name, topic_id, {p: list(r) for p, r in assignment.partitions.items()},
                           configs.get(name, {}))

    # --- validation and placement ------------------------------------------------------------------------------

    def live_broker_ids(self) -> list[int]:
        return sorted(self.metadata.brokers)

    async def check_new_topic(
        self, name: str, num_partitions: int, replication_factor: int,
        assignment: dict[int, list[int]] | None, configs: dict[str, str],
    ) -> dict[int, list[int]]:
        """Kafka's CreateTopics validation, in Kafka's order and with its codes; returns the assignment to use."""
        validate_topic_name(name)
        existing = await self.topic_names()
        if name in existing:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        for other in existing:
            if collision_key(other) == collision_key(name):
                raise KafkaError(
                    ErrorCode.invalid_topic_exception, f"Topic '{name}' collides with existing topic: {other}"
                )
        validate_overrides(configs)
        brokers = self.live_broker_ids()
        if assignment:
            if num_partitions != -1 or replication_factor != -1:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            if len({len(replicas) for replicas in assignment.values()}) != 1:  # Kafka's validateTopicCreate
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment, "All partitions should have the same number of replicas"
                )
            if sorted(assignment) != list(range(len(assignment))):
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment, "partitions should be a consecutive 0-based integer sequence"
                )
            for replicas in assignment.values():
                if not replicas or len(set(replicas)) != len(replicas):
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment, f"Duplicate replica assignment found: {replicas}"
                    )
                for r in replicas:
                    if r not in brokers:
                        raise KafkaError(ErrorCode.invalid_replica_assignment, f"Unknown broker {r} in assignment")
            return assignment
        partitions = self.config["num.partitions"] if num_partitions == -1 else num_partitions
        rf = self.config["default.replication.factor"] if replication_factor == -1 else replication_factor
        if partitions <= 0:
            raise KafkaError(ErrorCode.invalid_partitions, "Number of partitions must be larger than 0.")
        if partitions > MAX_PARTITIONS_PER_REQUEST:
            raise KafkaError(
                ErrorCode.invalid_partitions,
                f"Number of partitions {partitions} exceeds the {MAX_PARTITIONS_PER_REQUEST} one request may create.",
            )
        if rf <= 0:
            raise KafkaError(ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0.")
        _check_rf(rf, brokers)
        return self._place(partitions, rf, brokers)

    def _place(self, partitions: int, rf: int, brokers: list[int], start_partition_id: int = -1,
               fixed_start_index: int = -1) -> dict[int, list[int]]:
        racks = {b: self.metadata.brokers[b].rack for b in brokers}
        metas = [BrokerMetadata(b, racks[b] if all(racks.values()) else None) for b in brokers]
        placed = assign_replicas_to_brokers(
            partitions, rf, metas, fixed_start_index=fixed_start_index, start_partition_id=start_partition_id
        )
        return {p: list(r) for p, r in placed.items()}

    def assign_new_partitions(
        self, existing: dict[int, list[int]], count: int, manual: Sequence[Any] | None
    ) -> dict[int, list[int]]:
        """CreatePartitions' placement: the given assignments checked, or Kafka's placement continued."""
        current = len(existing)
        rf = len(existing[0])
        brokers = self.live_broker_ids()
        if manual:
            if len(manual) != count - current:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"Increasing the number of partitions by {count - current} but {len(manual)} assignments provided.",
                )
            out: dict[int, list[int]] = {}
            for i, a in enumerate(manual):
                replicas = list(a.broker_ids)
                unknown = [b for b in replicas if b not in brokers]
                if unknown or len(set(replicas)) != len(replicas) or len(replicas) != rf:
                    raise KafkaError(ErrorCode.invalid_replica_assignment, f"Invalid assignment {replicas}")
                out[current + i] = replicas
            return out
        if count - current > MAX_PARTITIONS_PER_REQUEST:
            raise KafkaError(
                ErrorCode.invalid_partitions, f"Cannot add more than {MAX_PARTITIONS_PER_REQUEST} partitions"
            )
        _check_rf(rf, brokers)
        first = existing[0][0]
        start = brokers.index(first) if first in brokers else -1
        return self._place(count - current, rf, brokers, start_partition_id=current, fixed_start_index=start)

    # --- writes ------------------------------------------------------------------------------------------------

    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str],
                           wait_s: float = ADMIN_WAIT_S) -> TopicRecord:
        """Create the topic; then wait up to ``wait_s`` (0: not at all) for its partitions to be led."""
        session = self.membership.current()
        topic_id = uuid.uuid4()
        if await session.exists(zn.topic_path(name)):
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        await self._write_topic_config(name, configs)
        try:
            await session.create(
                zn.topic_path(name),
                zn.TopicAssignment({p: tuple(r) for p, r in assignment.items()}, topic_id=str(topic_id)).to_json(),
            )
        except NodeExistsError:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.") from None
        log.info("created topic %s with %d partitions, configs %s", name, len(assignment), configs or "{}")
        await self._await_metadata(
            lambda: (m := self.metadata.topics.get(name)) is not None
            and len(m.partitions) == len(assignment) and all(p.leader >= 0 for p in m.partitions.values()),
            f"topic {name} to get leaders", wait_s,
        )
        return TopicRecord(name, topic_id, assignment, dict(configs))

    async def ensure_offsets_topic(self) -> None:
        """``__consumer_offsets`` on first use, with Kafka's settings (compacted; RF capped to the brokers)."""
        if OFFSETS_TOPIC in await self.topic_names():
            return
        live = self.live_broker_ids()
        rf = min(self.config["offsets.topic.replication.factor"], len(live))
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
        }
        try:
            await self.create_topic(OFFSETS_TOPIC, self._place(self.config["offsets.topic.num.partitions"], rf, live),
                                    configs)
        except KafkaError as exc:
            if exc.code != ErrorCode.topic_already_exists:
                raise

    async def ensure_transaction_state_topic(self) -> None:
        """``__transaction_state`` on first use, with Kafka's settings (TransactionStateManager.transactionTopicConfigs:
        compacted, uncompressed, no unclean election). The replication factor is capped to the live brokers as for
        the offsets topic, and ``min.insync.replicas`` to that factor, so a cluster of one can run transactions."""
        if TRANSACTION_STATE_TOPIC in await self.topic_names():
            return
        live = self.live_broker_ids()
        rf = min(self.config["transaction.state.log.replication.factor"], len(live))
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(max(1, min(self.config["transaction.state.log.min.isr"], rf))),
            "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
        }
        try:
            await self.create_topic(
                TRANSACTION_STATE_TOPIC,
                self._place(self.config["transaction.state.log.num.partitions"], rf, live), configs,
            )
        except KafkaError as exc:
            if exc.code != ErrorCode.topic_already_exists:
                raise

    async def delete_topic(self, name: str, wait_s: float = ADMIN_WAIT_S) -> None:
        session = self.membership.current()
        if not self.config["delete.topic.enable"]:
            raise KafkaError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        if not _is_topic_name(name) or not await session.exists(zn.topic_path(name)):
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        with contextlib.suppress(NodeExistsError):
            await session.create(zn.delete_topic_path(name), b"", make_parents=True)
        log.info("topic %s marked for deletion", name)
        await self._await_metadata(lambda: name not in self.metadata.topics, f"topic {name} to be deleted", wait_s)

    async def add_partitions(self, name: str, new_assignment: dict[int, list[int]],
                             wait_s: float = ADMIN_WAIT_S) -> None:
        session = self.membership.current()
        path = zn.topic_path(name)
        data, stat = await session.get(path)
        current = zn.TopicAssignment.from_json(data, path)
        merged = dict(current.partitions)
        merged.update({p: tuple(r) for p, r in new_assignment.items()})
        updated = zn.TopicAssignment(merged, current.adding_replicas, current.removing_replicas, current.topic_id)
        try:
            await session.set(path, updated.to_json(), expected_version=stat.version)
        except BadVersionError:
            raise KafkaError(ErrorCode.reassignment_in_progress, f"topic {name} changed concurrently") from None
        total = len(merged)
        await self._await_metadata(
            lambda: (m := self.metadata.topics.get(name)) is not None and len(m.partitions) == total,
            f"topic {name} to reach {total} partitions", wait_s,
        )

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        await self._write_topic_config(name, configs)
        await self.membership.current().create(
            zn.CONFIG_CHANGE_PREFIX, zn.ConfigChangeNotification(f"topics/{name}").to_json(), sequential=True
        )

    async def _write_topic_config(self, name: str, configs: dict[str, str]) -> None:
        session = self.membership.current()
        path = zn.topic_config_path(name)
        data = zn.TopicConfig(configs).to_json()
        try:
            await session.create(path, data, make_parents=True)
        except NodeExistsError:
            await session.set(path, data)

    async def _await_metadata(self, done: Callable[[], bool], what: str, wait_s: float) -> None:
        """Kafka's admin requests answer once the change reached the metadata, REQUEST_TIMED_OUT after their
        timeout (the change itself stands), and at once when the timeout is 0 or less."""
        if wait_s <= 0:
            return
        if not await self.metadata.wait_until(done, wait_s):
            raise KafkaError(ErrorCode.request_timed_out, f"timed out waiting for {what}")


def _is_topic_name(name: str) -> bool:
    """Whether ``name`` could name a topic at all: an illegal one names none (and would be no valid znode path)."""
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def _check_rf(rf: int, brokers: list[int]) -> None:
    if rf > len(brokers):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Replication factor: {rf} larger than available brokers: {len(brokers)}.",
        )
