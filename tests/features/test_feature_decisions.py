"""The pure parts of finalized features: ``/feature``'s JSON as Kafka 3.9 reads and writes it, the controller's
first write, and how UpdateFeatures is judged."""

from __future__ import annotations

import pytest

from odradek.controller.features import (
    FAILED_WHOLE,
    FeatureUpdate,
    UpgradeType,
    decide_updates,
    enabled_node,
    registered_features,
    registered_ranges,
)
from odradek.coordination import znodes as zn
from odradek.errors import ErrorCode

UP, SAFE, UNSAFE = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE


def test_feature_znode_reads_what_kafka_writes() -> None:
    # Kafka 3.9's ZooKeeper-mode controller, as read from a live one: no features
    assert zn.FeatureZNode.from_json(b'{"features":{},"version":2,"status":1}') == zn.FeatureZNode({})
    v1 = b'{"version":1,"status":0,"features":{"f":{"min_version_level":1,"max_version_level":3}}}'
    assert zn.FeatureZNode.from_json(v1) == zn.FeatureZNode({"f": 3}, enabled=False, version=1)
    node = zn.FeatureZNode({"group.version": 1})
    assert node.to_json() == b'{"features":{"group.version":{"max_version_level":1}},"version":2,"status":1}'
    assert zn.FeatureZNode.from_json(node.to_json()) == node


@pytest.mark.parametrize("raw", [
    b'{"version":3,"status":1,"features":{}}', b'{"version":2,"features":{}}',
    b'{"version":2,"status":4,"features":{}}',
    b'{"version":2,"status":1}', b'{"version":1,"status":1,"features":{"f":{"max_version_level":1}}}',
    b'{"version":2,"status":1,"features":{"f":{}}}', b'[]', b'{',
])
def test_feature_znode_refuses_what_kafka_refuses(raw: bytes) -> None:
    with pytest.raises(zn.ZnodeDataError):
        zn.FeatureZNode.from_json(raw)


def test_failover_enables_feature_versioning_as_kafka() -> None:
    assert enabled_node(None) == zn.FeatureZNode({"group.version": 1})
    assert enabled_node(zn.FeatureZNode({"group.version": 0}, enabled=False)) == zn.FeatureZNode({})
    assert enabled_node(zn.FeatureZNode({})) is None  # an Enabled node is left as it is
    assert registered_ranges(registered_features()) == {"group.version": (0, 1)}
    assert registered_ranges({"x": {"min_version": 0}}) == {}


def test_updates_are_judged_as_kafka_4() -> None:
    brokers = {0: {"group.version": (0, 1)}, 1: {"group.version": (0, 1)}}
    ok = decide_updates([FeatureUpdate("group.version", 0, UNSAFE)], {"group.version": 1}, 0, brokers, False)
    assert (ok.error, ok.target) == (ErrorCode.none, {})
    same = decide_updates([FeatureUpdate("group.version", 1, UP)], {"group.version": 1}, 0, brokers, False)
    assert (same.error, same.target) == (ErrorCode.none, None)  # nothing to write
    checked = decide_updates([FeatureUpdate("group.version", 1, UP)], {}, 0, brokers, True)
    assert (checked.error, checked.target) == (ErrorCode.none, None)
    newer = decide_updates([FeatureUpdate("group.version", 1, SAFE)], {}, 0, brokers, False)
    assert newer.message == (FAILED_WHOLE + "Invalid update version 1 for feature group.version. Can't downgrade to "
                             "a newer version.")
    negative = decide_updates([FeatureUpdate("group.version", -1, SAFE)], {}, 0, brokers, False)
    assert negative.message == (FAILED_WHOLE + "Invalid update version -1 for feature group.version. A feature "
                                "version cannot be less than 0.")
    # a broker registered without the feature (Kafka 3.9 registers none) supports only level 0
    mixed = decide_updates([FeatureUpdate("group.version", 1, UP)], {}, 0, {**brokers, 7: {}}, False)
    assert (mixed.error, mixed.message, mixed.target) == (
        ErrorCode.invalid_update_version,
        FAILED_WHOLE + "Invalid update version 1 for feature group.version. Broker 7 does not support this "
                       "feature.", None)
    assert decide_updates([FeatureUpdate("group.version", 0, SAFE)], {"group.version": 1}, 0, {7: {}},
                          False).target == {}
    # a later update of the same name wins
    last = decide_updates([FeatureUpdate("group.version", 2, UP), FeatureUpdate("group.version", 1, UP)], {}, 0,
                          brokers, False)
    assert (last.error, last.target) == (ErrorCode.none, {"group.version": 1})
