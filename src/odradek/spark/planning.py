"""Pure decisions about offset ranges: resolving start/end bounds, admission control, splitting, data loss.

Kept free of I/O so every rule Spark's Kafka source applies (proportional rate limiting, minPartitions
splitting, what counts as lost data) can be tested without a cluster or a SparkSession.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from odradek.spark.options import EARLIEST, LATEST, OffsetBound, OptionError, TopicPartition

log = logging.getLogger(__name__)

OffsetMap = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Offsets the query needed are gone (retention, truncation, deleted topic) and failOnDataLoss is true."""


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Records [start, end) of one partition, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's offset JSON shape; partition keys are strings because JSON object keys are."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(value: Mapping[str, Mapping[str, int]] | str) -> OffsetMap:
    data = json.loads(value) if isinstance(value, str) else value
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


def report_data_loss(message: str, fail: bool) -> None:
    """Raise or warn, the single switch failOnDataLoss controls."""
    if fail:
        raise DataLossError(
            f"{message}. Some data may have been lost because they are not available in the cluster any more; "
            "either the data was aged out by retention or the topic may have been deleted. If you want the "
            'query to continue, set the source option "failOnDataLoss" to "false".'
        )
    log.warning("%s; continuing because failOnDataLoss is false", message)


def resolve_bound(
    bound: OffsetBound,
    partitions: Iterable[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    offsets_for_times: Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, int]],
    *,
    timestamp_strategy: str = "error",
) -> OffsetMap:
    """Turn a start or end option into one concrete offset per partition.

    Explicit offsets must name every partition, as Spark requires; -2/-1 mean earliest/latest. A
    timestamp maps to the first offset at or after it; when none exists the strategy decides between an
    error and the latest offset.
    """
    parts = sorted(partitions)
    if bound.kind == "earliest":
        return {tp: earliest[tp] for tp in parts}
    if bound.kind == "latest":
        return {tp: latest[tp] for tp in parts}
    if bound.kind == "offsets":
        missing = [tp for tp in parts if tp not in bound.offsets]
        if missing:
            raise OptionError(f"offsets JSON must name every partition; missing {missing}")
        out: OffsetMap = {}
        for tp in parts:
            value = bound.offsets[tp]
            out[tp] = earliest[tp] if value == EARLIEST else latest[tp] if value == LATEST else value
        return out
    if bound.kind == "timestamp":
        wanted = {tp: bound.timestamp for tp in parts}
    else:
        missing = [tp for tp in parts if tp not in bound.offsets]
        if missing:
            raise OptionError(f"offsets-by-timestamp JSON must name every partition; missing {missing}")
        wanted = {tp: bound.offsets[tp] for tp in parts}
    found = offsets_for_times(wanted)
    out = {}
    for tp in parts:
        offset = found.get(tp, -1)
        if offset is None or offset < 0:
            if timestamp_strategy == "latest":
                offset = latest[tp]
            else:
                raise OptionError(
                    f"no offset at or after timestamp {wanted[tp]} in {tp[0]}-{tp[1]}; set "
                    "startingOffsetsByTimestampStrategy=latest to start at the latest offset instead"
                )
        out[tp] = offset
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int) -> OffsetMap:
    """Cap the total number of offsets to ``max_rows``, shared in proportion to what each partition has.

    Largest remainder rounding makes the batch hold exactly ``max_rows`` offsets when more are available,
    so a query's batch boundaries are predictable from the data alone.
    """
    sizes = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(sizes.values())
    if total <= max_rows:
        return dict(latest)
    shares = {tp: max_rows * size / total for tp, size in sizes.items()}
    grant = {tp: math.floor(share) for tp, share in shares.items()}
    leftover = max_rows - sum(grant.values())
    by_fraction = sorted(sizes, key=lambda tp: (-(shares[tp] - grant[tp]), tp))
    for tp in by_fraction[:leftover]:
        grant[tp] += 1
    return {tp: start.get(tp, latest[tp]) + grant[tp] for tp in latest}


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Cut ranges into more tasks when fewer than ``min_partitions`` exist, big ranges into more pieces."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = min(max(math.ceil(min_partitions * r.size / total), 1), r.size)
        step, extra = divmod(r.size, pieces)
        begin = r.start
        for i in range(pieces):
            end = begin + step + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, begin, end))
            begin = end
    return out


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    new_partition_start: Mapping[TopicPartition, int],
    *,
    fail_on_data_loss: bool,
) -> list[OffsetRange]:
    """Ranges between two offset maps, reporting data loss where offsets went backwards or vanished.

    ``new_partition_start`` gives the earliest offset of partitions present in ``end`` only; a partition
    that appears after the query started should begin at offset 0, anything else means records were lost.
    """
    for tp in sorted(set(start) - set(end)):
        report_data_loss(f"partition {tp[0]}-{tp[1]} is gone", fail_on_data_loss)
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        if tp in start:
            begin = start[tp]
        else:
            begin = new_partition_start[tp]
            if begin != 0:
                report_data_loss(f"added partition {tp[0]}-{tp[1]} starts from {begin} instead of 0", fail_on_data_loss)
        if end[tp] < begin:
            report_data_loss(
                f"partition {tp[0]}-{tp[1]}'s offset went back from {begin} to {end[tp]}", fail_on_data_loss
            )
            continue
        ranges.append(OffsetRange(tp[0], tp[1], begin, end[tp]))
    return ranges


def clamp_to_available(
    ranges: list[OffsetRange], earliest: Mapping[TopicPartition, int], *, fail_on_data_loss: bool
) -> list[OffsetRange]:
    """Move range starts that retention has already deleted, or fail, before any task runs."""
    out = []
    for r in ranges:
        first = earliest.get((r.topic, r.partition))
        if first is not None and r.start < first:
            report_data_loss(
                f"offsets {r.start}-{min(first, r.end)} of {r.topic}-{r.partition} are no longer available",
                fail_on_data_loss,
            )
            r = OffsetRange(r.topic, r.partition, min(first, r.end), r.end)
        out.append(r)
    return out
