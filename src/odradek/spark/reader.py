"""Spark's batch and streaming readers, and the executor-side loop that turns one offset range into Arrow.

The reader objects live in two places: planning (offsets, partitions) runs on the driver, ``read`` runs in
executor Python workers on a pickled copy. So everything a task needs travels inside its
``RangePartition`` and network clients are opened inside ``read``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from odradek.clock import Clock, SystemClock
from odradek.spark.cluster import Address, Cluster
from odradek.spark.fetch import FetchConnection, PartitionData
from odradek.spark.options import OptionError, SourceOptions, TopicPartition
from odradek.spark.planning import (
    OffsetMap,
    OffsetRange,
    clamp_to_available,
    from_json,
    plan_ranges,
    rate_limit,
    report_data_loss,
    resolve_bound,
    split_ranges,
    to_json,
)
from odradek.spark.recordbatch import decode_batches, drop_aborted, split_batches

log = logging.getLogger(__name__)

OFFSET_OUT_OF_RANGE = 1
# Errors after which the right move is to find the leader again and retry.
RETRIABLE = {3, 5, 6, 7, 13, 15, 56, 74, 75, 78}
_RETRY_BACKOFF_S = 0.2


@dataclass
class RangePartition(InputPartition):
    """One task's work: offsets [start, end) of one partition plus what is needed to fetch them."""

    topic: str
    partition: int
    start: int
    end: int
    leader: Address | None
    client_config: dict[str, str]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    max_fetch_bytes: int
    read_committed: bool = False


class _RangeFetcher:
    """Fetch loop for one range; keeps the next Fetch in flight while the previous answer is decoded."""

    def __init__(self, part: RangePartition, cluster: Cluster) -> None:
        self.part = part
        self.cluster = cluster
        self.leader = part.leader
        self.conn: FetchConnection | None = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _send(self, offset: int) -> None:
        p = self.part
        if self.conn is None:
            if self.leader is None:
                self.leader = self.cluster.leader((p.topic, p.partition))
                if self.leader is None:
                    raise ConnectionError(f"{p.topic}-{p.partition} has no leader")
            self.conn = FetchConnection(*self.leader, timeout_s=max(p.poll_timeout_ms / 1000, 1.0))
        self.conn.send_fetch(p.topic, p.partition, offset, max_wait_ms=500, max_bytes=p.max_fetch_bytes,
                             isolation_level=1 if p.read_committed else 0)

    def _reset(self) -> None:
        self.close()
        self.leader = None

    def records(self) -> Iterator[pa.RecordBatch]:
        p = self.part
        offset = p.start
        deadline = time.monotonic() + p.poll_timeout_ms / 1000
        in_flight = False
        while offset < p.end:
            if time.monotonic() > deadline:
                report_data_loss(
                    f"could not read offsets {offset}-{p.end} of {p.topic}-{p.partition} within {p.poll_timeout_ms} ms",
                    p.fail_on_data_loss,
                )
                return
            try:
                if not in_flight:
                    self._send(offset)
                assert self.conn is not None
                data: PartitionData = self.conn.receive_fetch(p.topic, p.partition)
            except OSError as exc:
                log.info("fetch %s-%s at %d failed: %s; retrying", p.topic, p.partition, offset, exc)
                in_flight = False
                self._reset()
                time.sleep(_RETRY_BACKOFF_S)
                continue
            in_flight = False
            if data.error_code == OFFSET_OUT_OF_RANGE:
                offset = self._skip_lost(offset)
                continue
            if data.error_code in RETRIABLE:
                self._reset()
                time.sleep(_RETRY_BACKOFF_S)
                continue
            if data.error_code:
                raise RuntimeError(f"fetch {p.topic}-{p.partition} at {offset}: Kafka error {data.error_code}")
            batches = split_batches(data.records)
            if not batches:
                # Nothing below our end offset yet (a new leader catching up); wait until the deadline.
                time.sleep(_RETRY_BACKOFF_S)
                continue
            next_offset = batches[-1].last_offset + 1
            if next_offset <= offset:
                raise RuntimeError(f"fetch {p.topic}-{p.partition} at {offset} returned only older batches")
            if next_offset < p.end:
                self._send(next_offset)
                in_flight = True
            # Under read_committed the offsets still advance past aborted and control batches; only rows go.
            kept = drop_aborted(data.records, batches, data.aborted) if p.read_committed else batches
            batch = decode_batches(
                data.records,
                kept,
                topic=p.topic,
                partition=p.partition,
                lo=offset,
                hi=p.end,
                include_headers=p.include_headers,
            )
            deadline = time.monotonic() + p.poll_timeout_ms / 1000
            if batch.num_rows:
                yield batch
            offset = next_offset

    def _skip_lost(self, offset: int) -> int:
        p = self.part
        tp = (p.topic, p.partition)
        first = self.cluster.earliest([tp])[tp]
        if offset < first:
            report_data_loss(
                f"offsets {offset}-{min(first, p.end)} of {p.topic}-{p.partition} were deleted before they were read",
                p.fail_on_data_loss,
            )
            return first
        report_data_loss(
            f"offset {offset} of {p.topic}-{p.partition} is beyond the log end (the log was truncated)",
            p.fail_on_data_loss,
        )
        return p.end


def read_range(part: RangePartition) -> Iterator[pa.RecordBatch]:
    """Yield Arrow batches holding exactly the records of ``part`` that still exist, in offset order."""
    if part.start >= part.end:
        return
    fetcher = _RangeFetcher(part, Cluster(part.client_config, read_committed=part.read_committed))
    try:
        yield from fetcher.records()
    finally:
        fetcher.close()


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    # With no ranges at all Spark still runs one task, handing it a bare InputPartition: nothing to read.
    if not isinstance(partition, RangePartition):
        return iter(())
    return read_range(partition)


def _to_partitions(
    ranges: list[OffsetRange], leaders: dict[TopicPartition, Address | None], opts: SourceOptions
) -> list[RangePartition]:
    return [
        RangePartition(
            r.topic,
            r.partition,
            r.start,
            r.end,
            leaders.get((r.topic, r.partition)),
            opts.client_config,
            opts.include_headers,
            opts.fail_on_data_loss,
            opts.poll_timeout_ms,
            opts.max_partition_fetch_bytes,
            opts.read_committed,
        )
        for r in ranges
    ]


class OdradekBatchReader(DataSourceReader):
    """Batch read between startingOffsets and endingOffsets (default earliest to the high watermark)."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[RangePartition]:  # type: ignore[override]
        opts = self.opts
        cluster = Cluster(opts.client_config, read_committed=opts.read_committed)
        leaders = cluster.partitions(opts.subscription)
        tps = sorted(leaders)
        earliest = cluster.earliest(tps)
        latest = cluster.latest(tps)
        start = resolve_bound(
            opts.starting,
            tps,
            earliest,
            latest,
            cluster.offsets_for_times,
            timestamp_strategy=opts.timestamp_strategy,
        )
        end = resolve_bound(
            opts.ending, tps, earliest, latest, cluster.offsets_for_times, timestamp_strategy="latest"
        )
        ranges = []
        for tp in tps:
            if end[tp] < start[tp]:
                raise OptionError(f"{tp[0]}-{tp[1]}: ending offset {end[tp]} is before starting offset {start[tp]}")
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        ranges = clamp_to_available(ranges, earliest, fail_on_data_loss=opts.fail_on_data_loss)
        return _to_partitions(split_ranges(ranges, opts.min_partitions), leaders, opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return _read(partition)


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader whose offsets are Spark's Kafka offset JSON; the checkpoint is the truth.

    Read limits as Spark's Kafka source takes them: ``maxOffsetsPerTrigger`` caps a micro-batch (``ReadMaxRows``);
    ``minOffsetsPerTrigger`` (``ReadMinRows``) skips micro-batches while fewer new offsets exist, until
    ``maxTriggerDelay`` has passed since the last batch it let through. Python's read limits have no composite, so
    with both set Spark is handed ``ReadMinRows`` and the cap comes from the options. Under ``Trigger.AvailableNow``
    the minimum is ignored: waiting for more data would never end the query.
    """

    def __init__(self, opts: SourceOptions, clock: Clock | None = None) -> None:
        self.opts = opts
        self.clock = clock or SystemClock()
        self._cluster: Cluster | None = None
        self._target: OffsetMap | None = None
        self._latest: OffsetMap | None = None
        self._last_trigger_ms: int | None = None

    def __getstate__(self) -> dict:
        # Spark pickles the reader for its executors; an open admin client must stay behind.
        state = dict(self.__dict__)
        state["_cluster"] = None
        return state

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.opts.client_config, read_committed=self.opts.read_committed)
        return self._cluster

    def initialOffset(self) -> dict:
        opts = self.opts
        tps = sorted(self.cluster.partitions(opts.subscription))
        earliest = self.cluster.earliest(tps)
        latest = self.cluster.latest(tps)
        start = resolve_bound(
            opts.starting,
            tps,
            earliest,
            latest,
            self.cluster.offsets_for_times,
            timestamp_strategy=opts.timestamp_strategy,
        )
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = sorted(self.cluster.partitions(self.opts.subscription))
        self._target = self.cluster.latest(tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        tps = sorted(self.cluster.partitions(self.opts.subscription))
        if self._target is not None:
            tps = [tp for tp in tps if tp in self._target]
        latest = self.cluster.latest_not_before(tps, begin)
        if self._target is not None:
            latest = {tp: min(latest[tp], self._target[tp]) for tp in tps}
        self._latest = latest
        new = [tp for tp in tps if tp not in begin]
        effective = {tp: begin[tp] for tp in tps if tp in begin}
        effective.update(self.cluster.earliest(new))
        if isinstance(limit, ReadMinRows) and self._target is None and self._delay(limit.min_rows, effective, latest):
            return start
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if isinstance(limit, ReadMinRows):
            cap = self.opts.max_offsets_per_trigger
        end = rate_limit(effective, latest, cap) if cap else dict(latest)
        return to_json(end)

    def _delay(self, min_rows: int, start: OffsetMap, latest: OffsetMap) -> bool:
        """Whether to skip this micro-batch: fewer than ``min_rows`` new offsets, and maxTriggerDelay not yet over
        since the last batch let through (the first one always is)."""
        now = self.clock.monotonic_ms()
        waited = self._last_trigger_ms is None or now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms
        if not waited and sum(max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest) < min_rows:
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:  # type: ignore[override]
        opts = self.opts
        begin, finish = from_json(start), from_json(end)
        leaders = self.cluster.partitions(opts.subscription)
        for tp in sorted((set(begin) | set(finish)) - set(leaders)):
            report_data_loss(f"partition {tp[0]}-{tp[1]} is gone", opts.fail_on_data_loss)
        begin = {tp: o for tp, o in begin.items() if tp in leaders}
        finish = {tp: o for tp, o in finish.items() if tp in leaders}
        new_start = self.cluster.earliest([tp for tp in finish if tp not in begin])
        ranges = plan_ranges(begin, finish, new_start, fail_on_data_loss=opts.fail_on_data_loss)
        earliest = self.cluster.earliest([(r.topic, r.partition) for r in ranges])
        ranges = clamp_to_available(ranges, earliest, fail_on_data_loss=opts.fail_on_data_loss)
        return _to_partitions(split_ranges(ranges, opts.min_partitions), leaders, opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        return _read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, never in a consumer group."""

    def stop(self) -> None:
        self._cluster = None
