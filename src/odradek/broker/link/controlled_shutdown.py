"""The broker's side of a controlled shutdown: ask the active controller to move its leaderships away first.

Kafka makes ``controlled.shutdown.max.retries`` attempts while partitions remain led here (a controller failover may
happen meanwhile), then stops anyway: clients then see the leaders go as in a crash. The log lines are Kafka's.
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
                               retries: int) -> bool:
    """KafkaServer.controlledShutdown: up to ``retries`` attempts, logged with Kafka's messages; whether the
    controller moved every leadership away."""
    broker_id, clock = membership.broker_id, membership.clock
    prefix = f"[KafkaServer id={broker_id}] "
    log.info("%sStarting controlled shutdown", prefix)
    remaining = retries
    while remaining > 0:
        remaining -= 1
        controller_id = metadata.controller_id
        endpoint = metadata.endpoint(controller_id) if controller_id >= 0 else None
        if endpoint is None:
            log.info("%sNo zk controller present in the metadata cache", prefix)
        else:
            started = clock.monotonic_ms()
            try:
                response = await asyncio.wait_for(
                    request_controlled_shutdown(transport, controller_id, zn.Endpoint("PLAINTEXT", *endpoint),
                                                broker_id, membership.broker_epoch),
                    CONTROLLED_SHUTDOWN_CALL_S,
                )
                took = clock.monotonic_ms() - started
                if response.error_code != ErrorCode.none:
                    log.info("%sControlled shutdown request returned after %dms with error %s", prefix, took,
                             ErrorCode(response.error_code).name.upper())
                elif not response.remaining_partitions:
                    log.info("%sControlled shutdown request returned successfully after %dms", prefix, took)
                    return True
                else:
                    log.info("%sControlled shutdown request returned after %dms with %d partitions remaining to "
                             "move", prefix, took, len(response.remaining_partitions))
            except Exception as exc:
                log.warning("%sError during controlled shutdown, possibly because leader movement took longer than "
                            "the configured controller.socket.timeout.ms and/or request.timeout.ms: %s", prefix, exc)
        if remaining > 0:
            await clock.sleep(SHUTDOWN_RETRY_BACKOFF_S)
            log.info("%sRetrying controlled shutdown (%d retries remaining)", prefix, remaining)
    log.warning("%sProceeding to do an unclean shutdown as all the controlled shutdown attempts failed", prefix)
    return False
