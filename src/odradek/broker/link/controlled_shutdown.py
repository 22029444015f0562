"""The broker's side of a controlled shutdown: ask the active controller to move its leaderships away first.

Kafka retries the request ``controlled.shutdown.max.retries`` times while partitions remain led here (a controller
failover may happen meanwhile), then stops anyway: clients then see the leaders go as in a crash.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.broker.link.membership import Membership
from odradek.broker.metadata import MetadataCache
from odradek.controller import TcpTransport, request_controlled_shutdown
from odradek.coordination import znodes as zn
from odradek.errors import ErrorCode

log = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_CALL_S = 30.0  # one ControlledShutdown round trip; retried up to controlled.shutdown.max.retries
SHUTDOWN_RETRY_BACKOFF_S = 1.0


async def shut_down_controlled(membership: Membership, metadata: MetadataCache, transport: TcpTransport,
                               retries: int) -> None:
    broker_id = membership.broker_id
    for attempt in range(retries + 1):
        controller_id = metadata.controller_id
        endpoint = metadata.endpoint(controller_id) if controller_id >= 0 else None
        if endpoint is None:
            log.info("controlled shutdown: no controller known (attempt %d)", attempt + 1)
        else:
            try:
                response = await asyncio.wait_for(
                    request_controlled_shutdown(transport, controller_id, zn.Endpoint("PLAINTEXT", *endpoint),
                                                broker_id, membership.broker_epoch),
                    CONTROLLED_SHUTDOWN_CALL_S,
                )
                if response.error_code == ErrorCode.none and not response.remaining_partitions:
                    log.info("controlled shutdown of broker %d succeeded", broker_id)
                    return
                log.info("controlled shutdown: %d partitions still led here (error %d)",
                         len(response.remaining_partitions), response.error_code)
            except Exception as exc:
                log.info("controlled shutdown attempt %d failed: %s", attempt + 1, exc)
        await asyncio.sleep(SHUTDOWN_RETRY_BACKOFF_S)
    log.warning("controlled shutdown of broker %d did not complete; stopping anyway", broker_id)
