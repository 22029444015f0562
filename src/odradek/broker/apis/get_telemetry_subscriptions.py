"""GetTelemetrySubscriptions (key 71), version 0 (KIP-714): hidden, and answered with an empty subscription.

A Kafka broker without a client-telemetry receiver leaves keys 71 and 72 out of its ApiVersions answer
(ApiVersionManager filters them while no ``ClientTelemetry`` metrics reporter is configured), so clients that follow
KIP-714 never ask; ``ADVERTISED = False`` keeps the key out of ApiVersions here too. A client that asks anyway gets
its connection closed by Kafka (3.9 and 4.x alike: the differential corpus shows it, docs/differences.md lists it);
odradek answers it instead: a client instance id (a new one when the request carries the zero id), no requested
metrics (an empty subscription), Kafka's accepted compression types (zstd, lz4, gzip, snappy), its default push
interval (5 minutes), ``telemetry.max.bytes`` default (1 MiB) and delta temporality.
"""

from __future__ import annotations

import datetime
import uuid
import zlib
from typing import Any

from odradek.broker.apis import NO_THROTTLE, RequestContext, fit
from odradek.errors import ErrorCode

API_KEY = 71
MIN_VERSION = 0
MAX_VERSION = 0
ADVERTISED = False

COMPRESSION_TYPES = (4, 3, 1, 2)  # zstd, lz4, gzip, snappy: Kafka's ClientMetricsManager order
PUSH_INTERVAL = datetime.timedelta(minutes=5)
TELEMETRY_MAX_BYTES = 1_048_576


async def handle(ctx: RequestContext, request: Any) -> Any:
    instance = request.client_instance_id
    if instance is None or instance.int == 0:
        instance = uuid.uuid4()
    # Kafka derives the id from the subscription's metrics, interval and the instance; none here but the last two
    subscription_id = zlib.crc32(f"[]{int(PUSH_INTERVAL.total_seconds() * 1000)}{instance}".encode()) - (1 << 31)
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
               client_instance_id=instance, subscription_id=subscription_id,
               accepted_compression_types=COMPRESSION_TYPES, push_interval=PUSH_INTERVAL,
               telemetry_max_bytes=TELEMETRY_MAX_BYTES, delta_temporality=True, requested_metrics=())
