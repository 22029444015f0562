"""The controller's reads and writes of Kafka's znodes, fenced by the controller epoch.

Every write the active controller makes to shared state is a multi-op transaction that starts with a check of
``/controller_epoch``'s version (Kafka 2.2's ``checkedEphemeral``/``MultiRequest`` fencing): once another broker
has won an election and bumped that version, a zombie's writes fail as a whole and it learns it must resign
(:class:`ControllerMovedError`). Bulk reads pipeline (``get_many``), which is what makes a failover with 100,000
partitions take seconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.controller.context import LeaderIsr, ReplicaAssignment, TopicPartition
from odradek.coordination.store import (
    BadVersionError,
    Check,
    CoordinationError,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    Op,
    OpResult,
    Session,
    SetData,
    Stat,
    WatchCallback,
)
from odradek.coordination.znodes import (
    BROKER_IDS,
    CONTROLLER,
    CONTROLLER_EPOCH,
    DELETE_TOPICS,
    ISR_CHANGE_NOTIFICATION,
    LOG_DIR_EVENT_NOTIFICATION,
    PREFERRED_REPLICA_ELECTION,
    REASSIGN_PARTITIONS,
    TOPICS,
    BrokerRegistration,
    ControllerRegistration,
    IsrChangeNotification,
    LogDirEventNotification,
    PartitionReassignment,
    PartitionState,
    PreferredReplicaElection,
    TopicAssignment,
    broker_path,
    decode_controller_epoch,
    decode_or_skip,
    delete_topic_path,
    encode_controller_epoch,
    partition_path,
    partition_state_path,
    partitions_path,
    read_topic_configs,
    topic_config_path,
    topic_path,
)
from odradek.protocol.ibp import registration_refusal

__all__ = ["ControllerMovedError", "ControllerStore", "LoadedTopic"]

log = logging.getLogger(__name__)

MULTI_CHUNK = 500
MULTIS_IN_FLIGHT = 4
"""Ops per fenced transaction: big enough to amortise round trips, small enough for ZooKeeper's 1 MB limit."""


class ControllerMovedError(Exception):
    """Another controller holds a newer epoch: this one must resign."""


@dataclass(frozen=True, slots=True)
class LoadedTopic:
    name: str
    assignment: TopicAssignment
    version: int


def _leader_isr(state: PartitionState, stat: Stat) -> LeaderIsr:
    return LeaderIsr(state.leader, state.leader_epoch, tuple(state.isr), state.controller_epoch, stat.version)


def _state_json(s: LeaderIsr) -> bytes:
    return PartitionState(s.leader, s.leader_epoch, s.isr, s.controller_epoch).to_json()


class ControllerStore:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.epoch_zk_version = -1
        self._refused: set[tuple[int, int]] = set()

    # ------------------------------------------------------------------------------------- election

    async def controller_id(self, watch: WatchCallback | None) -> int | None:
        """The active controller's id, leaving ``watch`` armed on ``/controller`` either way."""
        stat = await self.session.exists(CONTROLLER, watch=watch)
        if stat is None:
            return None
        try:
            data, _ = await self.session.get(CONTROLLER)
        except NoNodeError:
            return None
        registration = decode_or_skip(ControllerRegistration.from_json, data, CONTROLLER)
        return registration.broker_id if registration else None

    async def try_register(self, broker_id: int, timestamp: int) -> bool:
        """Create the ephemeral ``/controller``; an existing one counts as ours when this session owns it (a
        create whose reply a connection loss swallowed, sent again: Kafka's ``CheckedEphemeral``)."""
        try:
            await self.session.create(CONTROLLER, ControllerRegistration(broker_id, timestamp).to_json(),
                                      ephemeral=True)
            return True
        except NodeExistsError:
            try:
                _, stat = await self.session.get(CONTROLLER)
            except NoNodeError:
                return False
            return stat.ephemeral_owner == self.session.session_id

    async def increment_epoch(self) -> int:
        """Bump ``/controller_epoch`` by compare-and-set; a lost race means somebody else is controller."""
        try:
            data, stat = await self.session.get(CONTROLLER_EPOCH)
        except NoNodeError:
            try:
                await self.session.create(CONTROLLER_EPOCH, encode_controller_epoch(1))
                self.epoch_zk_version = 0
                return 1
            except NodeExistsError:
                raise ControllerMovedError("lost the race to create /controller_epoch") from None
        epoch = decode_controller_epoch(data) + 1
        try:
            new = await self.session.set(CONTROLLER_EPOCH, encode_controller_epoch(epoch), stat.version)
        except BadVersionError:
            raise ControllerMovedError("lost the race to increment /controller_epoch") from None
        self.epoch_zk_version = new.version
        return epoch

    async def current_epoch(self) -> int:
        data, _ = await self.session.get(CONTROLLER_EPOCH)
        return decode_controller_epoch(data)

    async def delete_controller_if_mine(self, broker_id: int) -> None:
        try:
            data, stat = await self.session.get(CONTROLLER)
        except NoNodeError:
            return
        registration = decode_or_skip(ControllerRegistration.from_json, data, CONTROLLER)
        if registration and registration.broker_id == broker_id and stat.ephemeral_owner == self.session.session_id:
            try:
                await self.session.delete(CONTROLLER, stat.version)
            except CoordinationError:
                pass

    # ---------------------------------------------------------------------------------------- reads

    async def brokers(self, watch: WatchCallback | None) -> dict[int, tuple[BrokerRegistration, int]]:
        """Live brokers with their epochs (the czxid of their registration); a broker whose registration says it
        runs an inter-broker protocol odradek does not speak is left out, with one log line saying why."""
        names = await self.session.children(BROKER_IDS, watch=watch)
        ids = sorted(int(n) for n in names if n.isdigit())
        results = await self.session.get_many([broker_path(b) for b in ids])
        out: dict[int, tuple[BrokerRegistration, int]] = {}
        for broker_id, result in zip(ids, results, strict=True):
            if isinstance(result, CoordinationError):
                continue
            registration = decode_or_skip(BrokerRegistration.from_json, result[0], broker_path(broker_id))
            if registration is None:
                continue
            refusal = registration_refusal(broker_id, registration.version)
            if refusal is not None:
                if (broker_id, result[1].czxid) not in self._refused:  # once per registration, not per event
                    self._refused.add((broker_id, result[1].czxid))
                    log.error("%s", refusal)
                continue
            out[broker_id] = (registration, result[1].czxid)
        return out

    async def broker(self, broker_id: int, watch: WatchCallback) -> tuple[BrokerRegistration, int] | None:
        """One broker's registration and epoch, leaving ``watch`` armed on its znode whether or not it exists
        (Kafka's ``registerZNodeChangeHandlerAndCheckExistence`` for ``BrokerModificationsHandler``)."""
        path = broker_path(broker_id)
        try:
            data, stat = await self.session.get(path, watch=watch)
        except NoNodeError:
            await self.session.exists(path, watch=watch)  # armed for the znode's return (a restart)
            return None
        registration = decode_or_skip(BrokerRegistration.from_json, data, path)
        return None if registration is None else (registration, stat.czxid)

    async def topic_names(self, watch: WatchCallback | None) -> set[str]:
        return set(await self.session.children(TOPICS, watch=watch))

    async def topics(
        self, names: Iterable[str], watch_for: Callable[[str], WatchCallback] | None = None
    ) -> dict[str, LoadedTopic]:
        """Topic znodes; with ``watch_for`` each read also arms that topic's data watch (partition additions)."""
        ordered = sorted(names)
        if watch_for is None:
            raw = await self.session.get_many([topic_path(t) for t in ordered])
        else:
            raw = await _gather_chunks(
                [self.session.get(topic_path(t), watch=watch_for(t)) for t in ordered]
            )
        out: dict[str, LoadedTopic] = {}
        for topic, result in zip(ordered, raw, strict=True):
            if isinstance(result, BaseException):
                continue
            data, stat = result
            assignment = decode_or_skip(TopicAssignment.from_json, data, topic_path(topic))
            if assignment is not None:
                out[topic] = LoadedTopic(topic, assignment, stat.version)
        return out

    async def states(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, LeaderIsr]:
        results = await self.session.get_many([partition_state_path(tp.topic, tp.partition) for tp in partitions])
        out: dict[TopicPartition, LeaderIsr] = {}
        for index, (tp, result) in enumerate(zip(partitions, results, strict=True)):
            if index % 10_000 == 9_999:
                await asyncio.sleep(0)  # let the session's pings and other work through
            if isinstance(result, CoordinationError):
                continue
            path = partition_state_path(tp.topic, tp.partition)
            state = decode_or_skip(PartitionState.from_json, result[0], path)
            if state is not None:
                out[tp] = _leader_isr(state, result[1])
        return out

    async def state_with_watch(self, tp: TopicPartition, watch: WatchCallback) -> LeaderIsr | None:
        path = partition_state_path(tp.topic, tp.partition)
        try:
            data, stat = await self.session.get(path, watch=watch)
        except NoNodeError:
            return None
        state = decode_or_skip(PartitionState.from_json, data, path)
        return _leader_isr(state, stat) if state else None

    async def topic_configs(self, topics: Iterable[str]) -> dict[str, Mapping[str, str]]:
        """Every topic's overrides, empty for one without a config znode."""
        ordered = sorted(topics)
        found = await read_topic_configs(self.session, ordered)
        return {topic: found.get(topic, {}) for topic in ordered}

    async def reassignments(self, watch: WatchCallback | None) -> dict[TopicPartition, tuple[int, ...]]:
        stat = await self.session.exists(REASSIGN_PARTITIONS, watch=watch)
        if stat is None:
            return {}
        try:
            data, _ = await self.session.get(REASSIGN_PARTITIONS)
        except NoNodeError:
            return {}
        parsed = decode_or_skip(PartitionReassignment.from_json, data, REASSIGN_PARTITIONS)
        return dict(parsed.partitions) if parsed else {}

    async def preferred_elections(self, watch: WatchCallback | None) -> set[TopicPartition] | None:
        """Partitions asked for in ``/admin/preferred_replica_election``; None when the znode is absent."""
        stat = await self.session.exists(PREFERRED_REPLICA_ELECTION, watch=watch)
        if stat is None:
            return None
        try:
            data, _ = await self.session.get(PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return None
        parsed = decode_or_skip(PreferredReplicaElection.from_json, data, PREFERRED_REPLICA_ELECTION)
        return set(parsed.partitions) if parsed else set()

    async def topics_to_delete(self, watch: WatchCallback | None) -> set[str]:
        return set(await self.session.children(DELETE_TOPICS, watch=watch))

    async def isr_change_notifications(
        self, watch: WatchCallback | None
    ) -> tuple[list[str], set[TopicPartition]]:
        names = sorted(await self.session.children(ISR_CHANGE_NOTIFICATION, watch=watch))
        paths = [f"{ISR_CHANGE_NOTIFICATION}/{n}" for n in names]
        partitions: set[TopicPartition] = set()
        for path, result in zip(paths, await self.session.get_many(paths), strict=True):
            if isinstance(result, CoordinationError):
                continue
            parsed = decode_or_skip(IsrChangeNotification.from_json, result[0], path)
            if parsed is not None:
                partitions.update(parsed.partitions)
        return paths, partitions

    async def log_dir_event_notifications(self, watch: WatchCallback | None) -> tuple[list[str], set[int]]:
        """The pending ``log_dir_event_*`` notifications and the brokers they name."""
        names = sorted(await self.session.children(LOG_DIR_EVENT_NOTIFICATION, watch=watch))
        paths = [f"{LOG_DIR_EVENT_NOTIFICATION}/{n}" for n in names]
        brokers: set[int] = set()
        for path, result in zip(paths, await self.session.get_many(paths), strict=True):
            if isinstance(result, CoordinationError):
                continue
            parsed = decode_or_skip(LogDirEventNotification.from_json, result[0], path)
            if parsed is not None:
                brokers.add(parsed.broker)
        return paths, brokers

    # --------------------------------------------------------------------------------------- writes

    async def fenced(self, keyed_ops: Sequence[tuple[object, Op]]) -> tuple[dict[object, OpResult],
                                                                          dict[object, CoordinationError]]:
        """Apply each op under the epoch check, in chunks; an op that fails is set aside and the rest retried.

        Raises :class:`ControllerMovedError` when the epoch check itself fails.
        """
        done: dict[object, OpResult] = {}
        failed: dict[object, CoordinationError] = {}
        chunks = [list(keyed_ops[i : i + MULTI_CHUNK]) for i in range(0, len(keyed_ops), MULTI_CHUNK)]
        # A few transactions in flight at once: one at a time, 10,000 partition states took twenty round trips
        # through ZooKeeper's commit pipeline in a row.
        for start in range(0, len(chunks), MULTIS_IN_FLIGHT):
            window = chunks[start : start + MULTIS_IN_FLIGHT]
            outcomes = await asyncio.gather(*(self._fenced_chunk(c, done, failed) for c in window),
                                            return_exceptions=True)
            for outcome in outcomes:  # every transaction of the window has ended; the first failure wins
                if isinstance(outcome, BaseException):
                    raise outcome
        return done, failed

    async def _fenced_chunk(self, chunk: list[tuple[object, Op]], done: dict[object, OpResult],
                            failed: dict[object, CoordinationError]) -> None:
        """One transaction of ops behind the epoch check; an op that fails is set aside and the rest retried."""
        while chunk:
            ops: list[Op] = [Check(CONTROLLER_EPOCH, self.epoch_zk_version)]
            ops.extend(op for _, op in chunk)
            try:
                results = await self.session.multi(ops)
            except CoordinationError as error:
                index = error.failed_op_index
                if index is None or index == 0:
                    if index == 0 or (isinstance(error, BadVersionError) and error.path == CONTROLLER_EPOCH):
                        raise ControllerMovedError(f"controller epoch znode moved on: {error}") from None
                    raise
                key, _ = chunk.pop(index - 1)
                failed[key] = error
                continue
            for (key, _), result in zip(chunk, results[1:], strict=True):
                done[key] = result
            chunk = []

    async def write_states(
        self, updates: Mapping[TopicPartition, LeaderIsr]
    ) -> tuple[dict[TopicPartition, LeaderIsr], dict[TopicPartition, CoordinationError]]:
        """Compare-and-set each partition's state on the version in ``LeaderIsr.zk_version``; returns the
        written states with their new versions, and the failures (BadVersion: somebody else wrote first)."""
        ops = [(tp, SetData(partition_state_path(tp.topic, tp.partition), _state_json(s), s.zk_version))
               for tp, s in updates.items()]
        done, failed = await self.fenced(ops)
        written: dict[TopicPartition, LeaderIsr] = {}
        for key, result in done.items():
            tp = key if isinstance(key, TopicPartition) else TopicPartition(*key)  # type: ignore[misc]
            assert isinstance(result, Stat)
            s = updates[tp]
            written[tp] = LeaderIsr(s.leader, s.leader_epoch, s.isr, s.controller_epoch, result.version)
        return written, {k: v for k, v in failed.items() if isinstance(k, TopicPartition)}

    async def create_states(
        self, states: Mapping[TopicPartition, LeaderIsr]
    ) -> tuple[dict[TopicPartition, LeaderIsr], dict[TopicPartition, CoordinationError]]:
        """Create new partitions' state znodes (and their parents)."""
        parents: list[Create] = []
        for topic in sorted({tp.topic for tp in states}):
            parents.append(Create(partitions_path(topic)))
        parents.extend(Create(partition_path(tp.topic, tp.partition)) for tp in sorted(states))
        for result in await self.session.create_many(parents):
            if isinstance(result, CoordinationError) and not isinstance(result, NodeExistsError):
                log.warning("creating a partition znode failed: %s", result)
        ops = [(tp, Create(partition_state_path(tp.topic, tp.partition), _state_json(s)))
               for tp, s in states.items()]
        done, failed = await self.fenced(ops)
        created = {
            tp: LeaderIsr(s.leader, s.leader_epoch, s.isr, s.controller_epoch, 0)
            for tp, s in states.items() if tp in done
        }
        return created, {k: v for k, v in failed.items() if isinstance(k, TopicPartition)}

    async def write_topic(self, topic: str, assignments: Mapping[int, ReplicaAssignment],
                          topic_id: str | None) -> None:
        doc = TopicAssignment(
            partitions={p: ra.replicas for p, ra in assignments.items()},
            adding_replicas={p: ra.adding for p, ra in assignments.items() if ra.adding},
            removing_replicas={p: ra.removing for p, ra in assignments.items() if ra.removing},
            topic_id=topic_id,
        )
        _, failed = await self.fenced([(topic, SetData(topic_path(topic), doc.to_json()))])
        if failed:
            raise failed[topic]

    async def write_reassignments(self, remaining: Mapping[TopicPartition, tuple[int, ...]]) -> None:
        """Rewrite ``/admin/reassign_partitions`` with what is still in progress; delete it when nothing is."""
        if remaining:
            op: Op = SetData(REASSIGN_PARTITIONS, PartitionReassignment(dict(remaining)).to_json())
        else:
            op = Delete(REASSIGN_PARTITIONS)
        _, failed = await self.fenced([("reassign", op)])
        if failed and not isinstance(failed["reassign"], NoNodeError):
            raise failed["reassign"]

    async def delete_fenced(self, path: str) -> None:
        _, failed = await self.fenced([(path, Delete(path))])
        if failed and not isinstance(failed[path], NoNodeError):
            raise failed[path]

    async def delete_topic_znodes(self, topic: str) -> None:
        """The end of a topic deletion: its assignment, states, config and deletion request go."""
        await self.session.delete_recursive(topic_path(topic))
        await self.session.delete_recursive(topic_config_path(topic))
        await self.session.delete_recursive(delete_topic_path(topic))

    async def delete_paths(self, paths: Iterable[str]) -> None:
        for path in paths:
            try:
                await self.session.delete(path)
            except NoNodeError:
                pass


async def _gather_chunks(coroutines: list, size: int = 1000) -> list:
    out: list = []
    for start in range(0, len(coroutines), size):
        out.extend(await asyncio.gather(*coroutines[start : start + size], return_exceptions=True))
    return out
