"""Option parsing mirrors Spark's Kafka source: names, defaults, and what each mode forbids."""

from __future__ import annotations

import pytest

from odradek.spark.options import OptionError, Subscription, parse_sink_options, parse_source_options

BASE = {"kafka.bootstrap.servers": "h:1"}


def test_defaults_differ_between_batch_and_streaming() -> None:
    batch = parse_source_options({**BASE, "subscribe": "a"}, streaming=False)
    stream = parse_source_options({**BASE, "subscribe": "a"}, streaming=True)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert stream.starting.kind == "latest"
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.client_config == {"bootstrap.servers": "h:1"}


def test_subscriptions() -> None:
    assert parse_source_options({**BASE, "subscribe": "a, b"}, streaming=True).subscription == Subscription(
        topics=("a", "b")
    )
    pattern = parse_source_options({**BASE, "subscribePattern": "ev-.*"}, streaming=True).subscription
    assert pattern.matches("ev-1") and not pattern.matches("xev-1")
    assign = parse_source_options({**BASE, "assign": '{"a": [1, 0]}'}, streaming=True).subscription
    assert assign.assign == (("a", 0), ("a", 1))
    with pytest.raises(OptionError, match="exactly one"):
        parse_source_options({**BASE, "subscribe": "a", "assign": '{"a": [0]}'}, streaming=True)


def test_options_are_case_insensitive_and_validated() -> None:
    opts = parse_source_options(
        {**BASE, "SUBSCRIBE": "a", "maxoffsetspertrigger": "10", "FailOnDataLoss": "false"}, streaming=True
    )
    assert opts.max_offsets_per_trigger == 10 and not opts.fail_on_data_loss
    with pytest.raises(OptionError, match="positive"):
        parse_source_options({**BASE, "subscribe": "a", "minPartitions": "0"}, streaming=False)
    with pytest.raises(OptionError, match="true or false"):
        parse_source_options({**BASE, "subscribe": "a", "includeHeaders": "yes"}, streaming=False)


def test_mode_specific_rules() -> None:
    with pytest.raises(OptionError, match="batch queries only"):
        parse_source_options({**BASE, "subscribe": "a", "endingOffsets": "latest"}, streaming=True)
    with pytest.raises(OptionError, match="may not be latest"):
        parse_source_options({**BASE, "subscribe": "a", "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(OptionError, match="may not be earliest"):
        parse_source_options({**BASE, "subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, streaming=False)


def test_timestamp_options_take_precedence_over_offsets() -> None:
    opts = parse_source_options(
        {**BASE, "subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "123"}, streaming=True
    )
    assert (opts.starting.kind, opts.starting.timestamp) == ("timestamp", 123)
    opts = parse_source_options(
        {**BASE, "subscribe": "a", "startingOffsetsByTimestamp": '{"a": {"0": 5}}'}, streaming=True
    )
    assert opts.starting.kind == "timestamps" and opts.starting.offsets == {("a", 0): 5}


def test_client_options_that_would_break_offset_tracking_are_refused() -> None:
    with pytest.raises(OptionError, match=r"group\.id"):
        parse_source_options({**BASE, "subscribe": "a", "kafka.group.id": "g"}, streaming=True)
    with pytest.raises(OptionError, match=r"bootstrap\.servers"):
        parse_source_options({"subscribe": "a"}, streaming=True)


def test_the_source_refuses_listeners_its_fetch_client_cannot_speak() -> None:
    with pytest.raises(OptionError, match="PLAINTEXT"):
        parse_source_options({**BASE, "subscribe": "a", "kafka.security.protocol": "SASL_SSL"}, streaming=True)
    opts = parse_sink_options({**BASE, "kafka.security.protocol": "SASL_SSL"})
    assert opts.client_config["security.protocol"] == "SASL_SSL"


def test_sink_options() -> None:
    opts = parse_sink_options({**BASE, "topic": "out"})
    assert opts.topic == "out" and opts.client_config == {"bootstrap.servers": "h:1"}
