"""ControlledShutdown (key 7), version 3 only: Kafka's binary format, the first flexible version.

See :mod:`odradek.protocol.controller_requests` for why v3; a request at any other version closes the connection with
one log line, as Kafka's broker closes it. Served by the active controller only: it moves the shutting-down broker's
leaderships to other ISR members, takes it out of ISRs, and answers with the partitions it still leads, so the broker
retries until none remain. Any other broker answers NOT_CONTROLLER, and a stale broker epoch gets STALE_BROKER_EPOCH.
With an authorizer, only a principal with CLUSTER_ACTION on the Cluster (the brokers' own, a super user as in Kafka) is
served; anyone else gets CLUSTER_AUTHORIZATION_FAILED and nothing changes.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import RequestContext
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import controller_requests as creq

API_KEY = creq.CONTROLLED_SHUTDOWN
MIN_VERSION = MAX_VERSION = creq.VERSIONS[API_KEY]
RAW = True


async def handle(ctx: RequestContext, request: creq.ControlledShutdownRequest) -> Any:
    if not authz.allowed(ctx, authz.Operation.CLUSTER_ACTION, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        return creq.ControlledShutdownResponse(int(ErrorCode.cluster_authorization_failed))
    try:
        remaining = await ctx.services.controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    except KafkaError as exc:
        return creq.ControlledShutdownResponse(int(exc.code))
    return creq.ControlledShutdownResponse(
        0, [creq.StopReplicaPartition(topic, partition) for topic, partition in remaining]
    )
