"""Topic config catalogue: Kafka names, defaults, validation messages, resolution and DescribeConfigs rows."""

from __future__ import annotations

import dataclasses

import pytest

from odradek.broker.topic_config import (
    CONFIG_DEFS,
    ConfigSource,
    ConfigType,
    LogConfig,
    broker_defaults_from_properties,
    describe,
    resolve,
    validate_overrides,
)
from odradek.errors import ErrorCode, KafkaError


def _invalid(overrides):
    with pytest.raises(KafkaError) as info:
        validate_overrides(overrides)
    assert info.value.code == ErrorCode.invalid_config
    return info.value.message


def test_log_config_defaults_match_the_catalogue():
    fields = {f.name: f.default for f in dataclasses.fields(LogConfig)}
    for name, definition in CONFIG_DEFS.items():
        key = name.replace(".", "_")
        if key in fields:
            assert fields[key] == definition.default, name


def test_kafka_3_defaults():
    config = LogConfig.build()
    assert config.retention_ms == 604_800_000
    assert config.segment_bytes == 1_073_741_824
    assert config.max_message_bytes == 1_048_588
    assert config.cleanup_policy == ("delete",)
    assert config.message_timestamp_type == "CreateTime"
    assert config.min_insync_replicas == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ({"segment.bytes": "10"}, "Invalid value 10 for configuration segment.bytes: Value must be at least 14"),
        ({"cleanup.policy": "shred"},
         "Invalid value shred for configuration cleanup.policy: String must be one of: compact, delete"),
        ({"message.timestamp.type": "Now"},
         "Invalid value Now for configuration message.timestamp.type: String must be one of: CreateTime, "
         "LogAppendTime"),
        ({"unclean.leader.election.enable": "yes"},
         "Invalid value yes for configuration unclean.leader.election.enable: Expected value to be either true "
         "or false"),
        ({"min.cleanable.dirty.ratio": "1.5"},
         "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
        ({"segment.bytes": "99999999999"},
         "Invalid value 99999999999 for configuration segment.bytes: Not a number of type INT"),
        ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ],
)
def test_bad_values_are_invalid_config_with_kafka_wording(overrides, message):
    assert _invalid(overrides) == message


def test_valid_overrides_are_typed():
    parsed = validate_overrides(
        {"cleanup.policy": "compact,delete", "retention.ms": "-1", "min.cleanable.dirty.ratio": "0.2",
         "unclean.leader.election.enable": "TRUE"}
    )
    assert parsed == {"cleanup.policy": ("compact", "delete"), "retention.ms": -1,
                      "min.cleanable.dirty.ratio": 0.2, "unclean.leader.election.enable": True}
    config = LogConfig.build({"cleanup.policy": "compact,delete"})
    assert config.compact and config.delete


def test_resolution_order_topic_then_broker_then_default():
    broker = broker_defaults_from_properties({"log.retention.hours": "1", "log.segment.bytes": "5000",
                                              "num.network.threads": "3"})
    assert broker == {"retention.ms": 3_600_000, "segment.bytes": 5000}
    values = resolve({"segment.bytes": 7000}, broker)
    assert (values["segment.bytes"], values["retention.ms"], values["flush.ms"]) == (7000, 3_600_000, 2**63 - 1)


def test_retention_ms_beats_minutes_beats_hours():
    props = {"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "3"}
    assert broker_defaults_from_properties(props)["retention.ms"] == 3
    del props["log.retention.ms"]
    assert broker_defaults_from_properties(props)["retention.ms"] == 120_000


def test_describe_reports_value_source_and_synonyms():
    rows = {e.name: e for e in describe({"retention.ms": 1000}, {"segment.bytes": 5000})}
    assert set(rows) == set(CONFIG_DEFS)
    retention = rows["retention.ms"]
    assert (retention.value, retention.source, retention.is_default) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG,
                                                                         False)
    # log.retention.ms has no default of its own in Kafka (log.retention.hours decides): no DEFAULT_CONFIG synonym
    assert retention.synonyms == (("retention.ms", "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG),)
    roll = rows["segment.ms"]
    assert (roll.value, roll.source, roll.synonyms) == ("604800000", ConfigSource.DEFAULT_CONFIG, ())
    assert rows["max.message.bytes"].synonyms == (("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG),)
    segment = rows["segment.bytes"]
    assert (segment.value, segment.source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)
    policy = rows["cleanup.policy"]
    assert (policy.value, policy.is_default, policy.type) == ("delete", True, ConfigType.LIST)
    assert not policy.read_only and not policy.sensitive
    assert [e.name for e in describe({}, None, ["segment.ms", "bogus"])] == ["segment.ms"]
