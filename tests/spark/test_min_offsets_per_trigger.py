"""minOffsetsPerTrigger and maxTriggerDelay on the odradek source, as Spark's Kafka source has them: a micro-batch is
skipped while fewer new offsets exist, until the delay has passed since the last batch; maxOffsetsPerTrigger still
caps a batch; Trigger.AvailableNow ignores the minimum. Driven through the reader's planning calls with a manual
clock against a real broker (Spark itself only calls these in the same order)."""

from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_brokers import Broker

from odradek.clock import ManualClock
from odradek.spark.options import OptionError, parse_source_options
from odradek.spark.reader import OdradekStreamReader


def _reader(broker: Broker, topic: str, clock: ManualClock, **options: str) -> OdradekStreamReader:
    opts = parse_source_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                                 "startingOffsets": "earliest", **options}, streaming=True)
    return OdradekStreamReader(opts, clock)


def _total(offsets: dict) -> int:
    return sum(sum(partitions.values()) for partitions in offsets.values())


def test_min_offsets_skip_batches_until_enough_data_or_the_delay(broker: Broker) -> None:
    topic = broker.create_topic(2)
    clock = ManualClock()
    reader = _reader(broker, topic, clock, minOffsetsPerTrigger="10", maxOffsetsPerTrigger="15",
                     maxTriggerDelay="30s")
    limit = reader.getDefaultReadLimit()
    start = reader.initialOffset()
    broker.produce(topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(4)])
    first = reader.latestOffset(start, limit)
    assert _total(first) == 4  # the first batch is never held back

    broker.produce(topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(6)])
    assert reader.latestOffset(first, limit) == first  # 6 new offsets < 10: skipped
    clock.advance(29_999)
    assert reader.latestOffset(first, limit) == first
    clock.advance(1)
    second = reader.latestOffset(first, limit)  # the delay is over: whatever there is
    assert _total(second) == 10

    broker.produce(topic, [{"value": b"%d" % i, "partition": i % 2} for i in range(40)])
    third = reader.latestOffset(second, limit)  # enough data: a batch, capped by maxOffsetsPerTrigger
    assert _total(third) - _total(second) == 15


def test_available_now_ignores_the_minimum(broker: Broker) -> None:
    topic = broker.create_topic(1)
    reader = _reader(broker, topic, ManualClock(), minOffsetsPerTrigger="100")
    start = reader.initialOffset()
    broker.produce(topic, [{"value": b"a"}])
    reader.latestOffset(start, reader.getDefaultReadLimit())  # the first batch goes; the clock never moves
    broker.produce(topic, [{"value": b"b"}])
    reader.prepareForTriggerAvailableNow()
    assert _total(reader.latestOffset(start, reader.getDefaultReadLimit())) == 2
    assert _total(reader.latestOffset(start, ReadAllAvailable())) == 2


def test_min_offsets_options_are_checked() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    opts = parse_source_options({**base, "minOffsetsPerTrigger": "5", "maxTriggerDelay": "2m"}, streaming=True)
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (5, 120_000)
    assert parse_source_options(base, streaming=True).max_trigger_delay_ms == 15 * 60_000
    assert parse_source_options({**base, "maxTriggerDelay": "250"}, streaming=True).max_trigger_delay_ms == 250
    with pytest.raises(OptionError, match="higher than maxOffsetsPerTrigger"):
        parse_source_options({**base, "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, streaming=True)
    with pytest.raises(OptionError, match="duration"):
        parse_source_options({**base, "maxTriggerDelay": "soon"}, streaming=True)
