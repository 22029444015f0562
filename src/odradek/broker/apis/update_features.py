"""UpdateFeatures (key 57), versions 0-2.

Sets finalized feature levels (KIP-584) in ``/feature``, on the active controller; the decisions are
``controller/features.py``'s. As Kafka 4.x answers: success is a top-level NONE with every named feature NONE;
any failure is the top-level error and message alone, with no per-feature results (v2 has none at all). Without
ALTER on the Cluster the request gets CLUSTER_AUTHORIZATION_FAILED, and a broker that is not the controller answers
NOT_CONTROLLER (Kafka 3.9's ZooKeeper-mode brokers do; clients send the request to the controller their metadata
names). v0's ``allow_downgrade`` is a safe downgrade, as Kafka maps it.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.controller.features import FeatureUpdate, UpgradeType
from odradek.errors import NOT_CONTROLLER_MESSAGE, ErrorCode, KafkaError

API_KEY = 57
MIN_VERSION = 0
MAX_VERSION = 2

CLUSTER_AUTHORIZATION_MESSAGE = "Cluster authorization failed."
"""Kafka's ``Errors.CLUSTER_AUTHORIZATION_FAILED.message()``."""


def _updates(request: Any) -> list[FeatureUpdate]:
    out = []
    for key in request.feature_updates:
        if hasattr(key, "upgrade_type"):
            kind = int(key.upgrade_type)
        else:
            kind = UpgradeType.SAFE_DOWNGRADE if key.allow_downgrade else UpgradeType.UPGRADE
        out.append(FeatureUpdate(key.feature, int(key.max_version_level), kind))
    return out


async def handle(ctx: RequestContext, request: Any) -> Any:
    updates = _updates(request)
    message: str | None
    if not authz.allowed(ctx, authz.Operation.ALTER, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        error, message = ErrorCode.cluster_authorization_failed, CLUSTER_AUTHORIZATION_MESSAGE
    elif not ctx.services.controller.is_active:
        error, message = ErrorCode.not_controller, NOT_CONTROLLER_MESSAGE
    else:
        try:
            outcome = await ctx.services.controller.update_features(
                updates, bool(getattr(request, "validate_only", False)))
            error, message = outcome.error, outcome.message
        except KafkaError as exc:
            error, message = exc.code, exc.message
    results: dict[str, Any] = {}
    if ctx.api_version < 2:
        result = nested(ctx, "UpdatableFeatureResult")
        names = dict.fromkeys(u.feature for u in updates) if error is ErrorCode.none else {}
        results["results"] = tuple(result(feature=name, error_code=ErrorCode.none, error_message="NONE")
                                   for name in names)
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=error, error_message=message, **results)
