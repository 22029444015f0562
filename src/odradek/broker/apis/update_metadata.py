"""UpdateMetadata (key 6), version 6 only: Kafka's binary format, the first flexible version, before topic ids.

See :mod:`odradek.protocol.controller_requests` for why v6; a request at any other version closes the connection with
one log line, as Kafka's broker closes it. Replaces this broker's view of the live brokers and of partition leaders,
ISRs and offline replicas, which Metadata, FindCoordinator and every leader check answer from. Partitions with leader -2
belong to a topic being deleted and leave the cache. Topic ids are read once from ``/brokers/topics/{topic}``. Older
controller epochs get STALE_CONTROLLER_EPOCH. With an authorizer, only a principal with CLUSTER_ACTION on the Cluster
(the brokers' own, a super user as in Kafka) is served; anyone else gets CLUSTER_AUTHORIZATION_FAILED and nothing
changes.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import RequestContext
from odradek.errors import ErrorCode
from odradek.protocol import controller_requests as creq

API_KEY = creq.UPDATE_METADATA
MIN_VERSION = MAX_VERSION = creq.VERSIONS[API_KEY]
RAW = True


async def handle(ctx: RequestContext, request: creq.UpdateMetadataRequest) -> Any:
    if not authz.allowed(ctx, authz.Operation.CLUSTER_ACTION, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        return creq.UpdateMetadataResponse(int(ErrorCode.cluster_authorization_failed))
    return await ctx.services.controller_requests.update_metadata(request)
