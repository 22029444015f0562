"""UpdateFeatures (57), compared with Kafka 4.x, whose answers the 4.x admin clients and ``kafka-features.sh``
expect (Kafka 3.9's ZooKeeper-mode controller supports no feature at all). Only requests that leave the shared
broker's finalized features as they were: a validated downgrade and refused updates."""

from __future__ import annotations

from differential_corpus import Call, Scenario


def _update(level: int, upgrade_type: int, validate_only: bool = False, feature: str = "group.version") -> Call:
    return Call(57, 1, {"feature_updates": [{"feature": feature, "max_version_level": level,
                                             "upgrade_type": upgrade_type}], "validate_only": validate_only})


SCENARIOS = [
    Scenario("update-features.v1.validate-only-safe-downgrade", _update(0, 2, validate_only=True), against="4"),
    Scenario("update-features.v1.downgrade-without-type", _update(0, 1), against="4"),
    Scenario("update-features.v1.unknown-upgrade-type", _update(0, 9), against="4"),
    Scenario("update-features.v1.negative-level", _update(-1, 2), against="4"),
]
