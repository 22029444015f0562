"""Finalized features (KIP-584): what this broker supports, and how the controller judges UpdateFeatures.

The supported ranges are the features odradek serves: ``group.version`` 0-1 (1 turns the KIP-848 consumer group
protocol on). Kafka leaves a feature whose highest level is 0 out of what it supports, so ``transaction.version`` and
``share.version`` are not listed until odradek serves their levels above 0.

The cluster's finalized levels live in the ``/feature`` znode
(:class:`~odradek.coordination.znodes.FeatureZNode`). The controller creates it on its first failover with every
supported feature at its highest level, as Kafka's ``enableFeatureVersioning`` does for a new cluster, and switches
a Disabled node to Enabled with no features, as Kafka does for one upgraded from before 2.7.

:func:`decide_updates` judges an UpdateFeatures request without I/O. Where Kafka 3.9's ZooKeeper-mode controller and
Kafka 4.x's KRaft controller differ, it follows 4.x (the version odradek's 4.x clients and ``kafka-features.sh``
expect): level 0 means "not finalized" (so a downgrade to 0 removes the feature), unsafe downgrades are accepted like
safe ones (odradek keeps no per-level metadata a downgrade could lose), ``validate_only`` answers without writing,
a request succeeds or fails whole, and errors are INVALID_UPDATE_VERSION with 4.x's words. A level must lie in
every live broker's registered range (a broker registered without features supports only level 0), as Kafka's
``reasonNotSupported`` checks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from odradek.coordination.znodes import FeatureZNode
from odradek.errors import ErrorCode

GROUP_VERSION = "group.version"

SUPPORTED: Mapping[str, tuple[int, int]] = {GROUP_VERSION: (0, 1)}
"""Feature name to the (min, max) levels this broker supports."""

_DISABLED = (0, 0)
FAILED_WHOLE = "The update failed for all features since the following feature had an error: "
"""Kafka 4.x's words before the failing update's own message."""


class UpgradeType(IntEnum):
    """``FeatureUpdate.UpgradeType``'s wire ids (UpdateFeatures v1+)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    feature: str
    level: int
    upgrade_type: int


@dataclass(frozen=True, slots=True)
class UpdateOutcome:
    error: ErrorCode
    message: str | None
    """The one answer the whole request gets (Kafka 4.x answers every feature of a request with it)."""
    target: dict[str, int] | None
    """The finalized levels to write, or None when nothing is to be written (an error, validate_only, no change)."""


def registered_features() -> dict[str, dict[str, int]]:
    """The ``features`` of this broker's ``/brokers/ids`` registration (version 5), as Kafka writes them."""
    return {name: {"min_version": low, "max_version": high} for name, (low, high) in SUPPORTED.items()}


def registered_ranges(features: Mapping[str, Mapping[str, int]]) -> dict[str, tuple[int, int]]:
    """A broker registration's ``features`` read back as (min, max) ranges; malformed entries are left out (the
    broker then counts as not supporting the feature)."""
    out: dict[str, tuple[int, int]] = {}
    for name, levels in features.items():
        low, high = levels.get("min_version"), levels.get("max_version")
        if isinstance(low, int) and isinstance(high, int):
            out[name] = (low, high)
    return out


def enabled_node(existing: FeatureZNode | None) -> FeatureZNode | None:
    """What the controller writes to ``/feature`` on failover (Kafka's ``enableFeatureVersioning``): a new node with
    every supported feature at its highest level when there is none, the same features Enabled when it was
    Disabled (Kafka clears them), and None (no write) when it is already Enabled."""
    if existing is None:
        return FeatureZNode({name: high for name, (_, high) in SUPPORTED.items()})
    if existing.enabled:
        return None
    return FeatureZNode({})


def _invalid(feature: str, level: int, reason: str) -> tuple[ErrorCode, str]:
    return ErrorCode.invalid_update_version, f"Invalid update version {level} for feature {feature}. {reason}"


def _reason_not_supported(level: int, what: str, supported: tuple[int, int]) -> str | None:
    low, high = supported
    if low <= level <= high:
        return None
    if high == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions [{low}, {high}]"


def _judge(update: FeatureUpdate, current: int, local_id: int,
           brokers: Mapping[int, Mapping[str, tuple[int, int]]]) -> tuple[ErrorCode, str | None]:
    """FeatureControlManager.updateFeature's checks, in its order."""
    if update.upgrade_type not in (UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE):
        return _invalid(update.feature, update.level, "The controller does not support the given upgrade type.")
    if update.level < 0:
        return _invalid(update.feature, update.level, "A feature version cannot be less than 0.")
    reason = _reason_not_supported(update.level, f"Local controller {local_id}",
                                   SUPPORTED.get(update.feature, _DISABLED))
    for broker_id, ranges in sorted(brokers.items()):
        if reason is not None:
            break
        reason = _reason_not_supported(update.level, f"Broker {broker_id}", ranges.get(update.feature, _DISABLED))
    if reason is not None:
        return _invalid(update.feature, update.level, reason)
    if update.level < current and update.upgrade_type == UpgradeType.UPGRADE:
        return _invalid(update.feature, update.level, "Can't downgrade the version of this feature without setting "
                                                      "the upgrade type to either safe or unsafe downgrade.")
    if update.level > current and update.upgrade_type != UpgradeType.UPGRADE:
        return _invalid(update.feature, update.level, "Can't downgrade to a newer version.")
    return ErrorCode.none, None


def decide_updates(updates: Sequence[FeatureUpdate], finalized: Mapping[str, int], local_id: int,
                   brokers: Mapping[int, Mapping[str, tuple[int, int]]], validate_only: bool) -> UpdateOutcome:
    """Judge the updates in request order against the finalized levels and the live brokers' ranges. As Kafka
    4.x's controller, the first update that fails fails the whole request with its error and nothing is written;
    otherwise every update is applied together. A later update of the same name replaces an earlier one, as the
    request's map does."""
    by_name = {u.feature: u for u in updates}
    target = dict(finalized)
    for name, update in by_name.items():
        code, message = _judge(update, finalized.get(name, 0), local_id, brokers)
        if code is not ErrorCode.none:
            return UpdateOutcome(code, f"{FAILED_WHOLE}{message}", None)
        if update.level == 0:
            target.pop(name, None)
        else:
            target[name] = update.level
    return UpdateOutcome(ErrorCode.none, None, None if validate_only or target == dict(finalized) else target)
