"""Moving a data directory written by the old single-broker mode into a cluster of one.

Before every broker ran the controller, ``odradek up`` with one broker kept its topics in ``<data-dir>/topics.json``
and its logs directly in ``<data-dir>``. Now a single broker is a cluster of one like ``--brokers N``: its topics
live in the journaled coordination store (``<data-dir>/coordination``) under Kafka's znodes and its logs in
``<data-dir>/broker-<id>``. On the first start such a directory is migrated: the logs, checkpoints and
``meta.properties`` move (renames, nothing is copied), the topics become znodes with their ids, configs and a
partition state led by the broker at a leader epoch past the one its logs last saw, and the producer-id block
carries on past the last one reserved, so no id is handed out twice. ``topics.json`` is renamed last; until then a
restart simply runs the migration again (every step can be repeated).

Refused, with a message that says what to do, are the directories this cannot map faithfully: one whose topics were
led by another broker id than the one starting, one whose store already belongs to another cluster, and any such
directory given to ``odradek broker --zookeeper`` (its store is elsewhere).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from odradek.broker.link.producer_id_blocks import PRODUCER_ID_BLOCK, block_json
from odradek.broker.log.checkpoint import fsync_dir, read_epochs
from odradek.broker.log.epoch_cache import FILE_NAME as EPOCH_FILE
from odradek.coordination import Backend, NodeExistsError, NoNodeError, Session
from odradek.coordination import znodes as zn

log = logging.getLogger(__name__)

LEGACY_TOPICS = "topics.json"
LEGACY_PRODUCER_IDS = "producer-ids.json"
MIGRATED = "topics.json.migrated"
BROKER_FILES = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint",
                "cleaner-offset-checkpoint", "meta.properties", ".kafka_cleanshutdown")


class MigrationRefused(Exception):
    """The directory holds single-broker data that cannot be carried over as asked; the message says why and how."""


@dataclass(frozen=True, slots=True)
class LegacyTopic:
    name: str
    topic_id: str
    assignment: dict[int, list[int]]
    configs: dict[str, str]


def is_legacy(data_dir: Path) -> bool:
    return (data_dir / LEGACY_TOPICS).is_file()


def refuse_for_zookeeper(data_dir: Path) -> None:
    if is_legacy(data_dir):
        raise MigrationRefused(
            f"{data_dir} holds the data of a single-broker odradek (topics.json), whose topics cannot be moved onto "
            f"ZooKeeper. Run `odradek up --data-dir {data_dir}` once to migrate it into an embedded cluster of one, "
            "or start this broker on an empty --data-dir."
        )


def _read_legacy(data_dir: Path) -> tuple[str, list[LegacyTopic]]:
    doc = json.loads((data_dir / LEGACY_TOPICS).read_text())
    topics = [
        LegacyTopic(name, t["topic_id"], {int(p): [int(r) for r in rs] for p, rs in t["partitions"].items()},
                    {str(k): str(v) for k, v in t.get("configs", {}).items()})
        for name, t in doc["topics"].items()
    ]
    return str(doc["cluster_id"]), topics


async def migrate(data_dir: Path, backend: Backend, broker_id: int) -> bool:
    """Migrate ``data_dir`` if it holds single-broker data; True when it did. Raises :class:`MigrationRefused`."""
    if not is_legacy(data_dir):
        return False
    cluster_id, topics = _read_legacy(data_dir)
    others = sorted({r for t in topics for rs in t.assignment.values() for r in rs} - {broker_id})
    if others:
        raise MigrationRefused(
            f"{data_dir} holds single-broker data led by broker {others[0]}, not by broker {broker_id}: start it "
            f"with `odradek up --data-dir {data_dir} --broker-id {others[0]}`."
        )
    session = await backend.session(30_000)
    try:
        await _check_cluster(session, data_dir, cluster_id)
        target = data_dir / f"broker-{broker_id}"
        target.mkdir(exist_ok=True)
        moved = _move_logs(data_dir, target, {f"{t.name}-{p}" for t in topics for p in t.assignment})
        await _write_znodes(session, target, cluster_id, broker_id, topics)
        await _carry_producer_ids(session, data_dir, broker_id)
    finally:
        await session.close()
    fsync_dir(target)
    os.replace(data_dir / LEGACY_TOPICS, target / MIGRATED)
    (data_dir / LEGACY_PRODUCER_IDS).unlink(missing_ok=True)
    fsync_dir(data_dir)
    log.warning("migrated single-broker data in %s into a cluster of one: %d topics, %d entries moved to %s",
                data_dir, len(topics), moved, target)
    return True


async def _check_cluster(session: Session, data_dir: Path, cluster_id: str) -> None:
    try:
        data, _ = await session.get(zn.CLUSTER_ID)
    except NoNodeError:
        await session.create(zn.CLUSTER_ID, zn.ClusterId(cluster_id).to_json(), make_parents=True)
        return
    existing = zn.ClusterId.from_json(data).id
    if existing != cluster_id:
        raise MigrationRefused(
            f"{data_dir} holds single-broker data of cluster {cluster_id} beside a coordination store of cluster "
            f"{existing}; move {data_dir / 'coordination'} away to migrate, or start on an empty --data-dir."
        )


def _move_logs(data_dir: Path, target: Path, partition_dirs: set[str]) -> int:
    moved = 0
    for entry in sorted(data_dir.iterdir()):
        wanted = partition_dirs if entry.is_dir() else BROKER_FILES
        if entry.name in wanted:
            os.replace(entry, target / entry.name)
            moved += 1
    return moved


def _next_leader_epoch(partition_dir: Path) -> int:
    """One past the newest epoch the log has seen: the leadership that follows is a new one, as on any restart."""
    path = partition_dir / EPOCH_FILE
    epochs = read_epochs(path) if path.exists() else []
    return max((epoch for epoch, _offset in epochs), default=-1) + 1


async def _write_znodes(session: Session, target: Path, cluster_id: str, broker_id: int,
                        topics: list[LegacyTopic]) -> None:
    for path in (zn.TOPICS, zn.CONFIG_TOPICS, zn.BROKER_IDS):
        await session.ensure_path(path)
    for topic in topics:
        assignment = zn.TopicAssignment({p: tuple(r) for p, r in topic.assignment.items()}, topic_id=topic.topic_id)
        await _put(session, zn.topic_config_path(topic.name), zn.TopicConfig(topic.configs).to_json())
        await _put(session, zn.topic_path(topic.name), assignment.to_json())
        await session.ensure_path(zn.partitions_path(topic.name))
        for index in sorted(topic.assignment):
            await session.ensure_path(zn.partition_path(topic.name, index))
            epoch = _next_leader_epoch(target / f"{topic.name}-{index}")
            state = zn.PartitionState(broker_id, epoch, (broker_id,), 0)
            await _put(session, zn.partition_state_path(topic.name, index), state.to_json())


async def _put(session: Session, path: str, data: bytes) -> None:
    try:
        await session.create(path, data)
    except NodeExistsError:
        await session.set(path, data)


async def _carry_producer_ids(session: Session, data_dir: Path, broker_id: int) -> None:
    path = data_dir / LEGACY_PRODUCER_IDS
    if not path.exists():
        return
    reserved_end = int(json.loads(path.read_text())["block_end"])  # exclusive
    try:
        data, _ = await session.get(PRODUCER_ID_BLOCK)
        if int(json.loads(data)["block_end"]) >= reserved_end - 1:
            return
    except NoNodeError:
        pass
    await _put(session, PRODUCER_ID_BLOCK, block_json(broker_id, 0, reserved_end - 1))
