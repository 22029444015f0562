"""How the group coordinator writes to ``__consumer_offsets``: append, wait for the commit, then replay.

Kafka's group coordinator (the CoordinatorRuntime of its group-coordinator module) keeps one rule for every
change: a handler computes records and a response without changing state, the records are appended, and a replay
function applies them to memory; a failed append leaves memory at the last committed state. The same replay
loads a partition at failover, so the live state and the loaded state come from one code path.

This module holds the writing half of that rule: :meth:`CoordinatorRuntime.write` appends one batch, waits
(at most ``offsets.commit.timeout.ms``) until it is committed, and only then calls the replay it was given. A
handler that has nothing durable to change writes nothing. The Kafka error a failed append raises is mapped to
what a group or offset request answers (Kafka's GroupMetadataManager.storeGroup and storeOffsets). Background
writes (tombstones of expired offsets, a fenced member's records) run as tasks the runtime keeps, so shutdown can
let them finish.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from odradek.broker.group.offsets_log import OffsetsLog
from odradek.clock import Clock
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.records import encode_batch

log = logging.getLogger(__name__)

Records = list[tuple[bytes, bytes | None]]
"""``__consumer_offsets`` records as (raw key, raw value or None for a tombstone), in the order they are written."""

GROUP_STORE_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}
"""How a failed append of group metadata reaches the client (Kafka's GroupMetadataManager.storeGroup)."""

OFFSET_STORE_ERRORS: dict[ErrorCode, ErrorCode] = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}
"""How a failed append of committed offsets reaches the client (Kafka's GroupMetadataManager.storeOffsets)."""


def group_error(code: ErrorCode) -> ErrorCode:
    return GROUP_STORE_ERRORS.get(code, code)


def offset_error(code: ErrorCode) -> ErrorCode:
    return OFFSET_STORE_ERRORS.get(code, code)


class CoordinatorRuntime:
    """Appends records to ``__consumer_offsets`` and replays them once committed; keeps background writes."""

    def __init__(self, clock: Clock, offsets_log: OffsetsLog, commit_timeout_ms: int) -> None:
        self._clock = clock
        self._log = offsets_log
        self._commit_timeout_s = commit_timeout_ms / 1000
        self._tasks: set[asyncio.Task[Any]] = set()

    async def write(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        replay: Callable[[], None],
        *,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        """Append ``records`` as one batch; once committed, call ``replay`` (which applies them to memory).

        On a failed append ``replay`` is not called, so memory stays at the last committed state; the Kafka
        error is returned unmapped. No records means nothing to append: ``replay`` runs at once.
        """
        if records:
            code = await self.append(partition, records, producer=producer)
            if code is not ErrorCode.none:
                return code
        replay()
        return ErrorCode.none

    async def append(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        producer: tuple[int, int] | None = None,
    ) -> ErrorCode:
        """Append one batch and wait (at most offsets.commit.timeout.ms) until it is committed; ``producer``
        (id, epoch) makes it that producer's transactional batch, as Kafka writes a TxnOffsetCommit."""
        entries = [(key, value, ()) for key, value in records]
        if producer is None:
            batch = encode_batch(entries, timestamp_ms=self._clock.now_ms())
        else:
            # Kafka's GroupMetadataManager.storeOffsets for a TxnOffsetCommit: the producer's id and epoch, no
            # sequence, the transactional attribute.
            batch = encode_batch(entries, timestamp_ms=self._clock.now_ms(), producer_id=producer[0],
                                 producer_epoch=producer[1], transactional=True)
        task = asyncio.ensure_future(self._log.append(partition, batch))
        try:
            await asyncio.wait_for(asyncio.shield(task), self._commit_timeout_s)
        except TimeoutError:
            task.add_done_callback(consume_result)
            return ErrorCode.request_timed_out
        except KafkaError as exc:
            return exc.code
        except Exception:
            log.exception("append to __consumer_offsets-%d failed", partition)
            return ErrorCode.unknown_server_error
        return ErrorCode.none

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a background write (or anything that must outlive its caller) as a task shutdown waits for."""
        task = asyncio.get_running_loop().create_task(coro)
        self.keep(task)

    def keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(consume_result)

    async def drain(self) -> None:
        """Give in-flight writes (at most offsets.commit.timeout.ms) to finish."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self._commit_timeout_s)


def consume_result(task: asyncio.Future[Any]) -> None:
    """Retrieve a background task's outcome so a late failure is logged once, not as 'never retrieved'."""
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None and not isinstance(exc, KafkaError):
        log.error("group coordinator background task failed", exc_info=exc)
