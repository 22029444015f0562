"""ApiVersions (key 18), versions 0-4.

Advertises exactly the APIs whose modules exist in ``broker/apis`` with the ranges they declare, except those that
say ``ADVERTISED = False`` (served, but hidden as Kafka hides them: the client-telemetry keys). A request for a
newer ApiVersions version than we know is answered with a v0 response carrying UNSUPPORTED_VERSION and ApiVersions'
own range (KIP-511, as Kafka answers it), so clients retry with a version we speak. v3+ clients send their software
name and version, which we accept without checking. v3+ answers also carry the features Kafka 4.0 brokers advertise
for KIP-848: ``group.version`` supported 0-1 and finalized at 1 (the consumer group protocol is on).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kio.index import load_response_schema
from kio.static.primitive import i16

from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


def _api_list(apis: Mapping[int, Any], cls: type[Any]) -> tuple[Any, ...]:
    return tuple(
        fit(cls, api_key=i16(key), min_version=i16(m.MIN_VERSION), max_version=i16(m.MAX_VERSION))
        for key, m in sorted(apis.items()) if getattr(m, "ADVERTISED", True)
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    api_version = nested(ctx, "ApiVersion")
    keys = tuple(
        api_version(api_key=i16(key), min_version=i16(m.MIN_VERSION), max_version=i16(m.MAX_VERSION))
        for key, m in sorted(ctx.services.apis.items()) if getattr(m, "ADVERTISED", True)
    )
    features: dict[str, Any] = {}
    if ctx.api_version >= 3:
        features = {
            "supported_features": (nested(ctx, "SupportedFeatureKey")(name="group.version", min_version=i16(0),
                                                                      max_version=i16(1)),),
            "finalized_features_epoch": ctx.services.metadata.version,
            "finalized_features": (nested(ctx, "FinalizedFeatureKey")(name="group.version", min_version_level=i16(1),
                                                                      max_version_level=i16(1)),),
        }
    return fit(ctx.response_class, error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE, **features)


def unsupported_version_response(apis: Mapping[int, Any]) -> Any:
    """KIP-511's fallback: the v0 response with error 35 and ApiVersions' own range alone, as Kafka's
    ApiVersionsRequest.getErrorResponse answers (the client retries at the newest version it shares with us, and
    learns the other ranges from that answer)."""
    cls = load_response_schema(API_KEY, 0)
    module = __import__(cls.__module__, fromlist=["ApiVersion"])
    return fit(cls, error_code=ErrorCode.unsupported_version,
               api_keys=_api_list({API_KEY: apis[API_KEY]}, module.ApiVersion))
