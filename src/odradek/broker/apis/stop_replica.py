"""StopReplica (key 5), version 3 only: Kafka's binary format, flexible, per-partition delete flag.

See :mod:`odradek.protocol.controller_requests` for why v3 and how its per-partition flags map onto one; a request at
any other version closes the connection with one log line, as Kafka's broker closes it. Stops replicating partitions:
the fetcher lets go and the partition stops leading; with ``delete_partitions`` its log is deleted from disk (topic
deletion, reassignment away from this broker). Older controller epochs get STALE_CONTROLLER_EPOCH. With an authorizer,
only a principal with CLUSTER_ACTION on the Cluster (the brokers' own, a super user as in Kafka) is served; anyone else
gets CLUSTER_AUTHORIZATION_FAILED and nothing changes.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import RequestContext
from odradek.errors import ErrorCode
from odradek.protocol import controller_requests as creq

API_KEY = creq.STOP_REPLICA
MIN_VERSION = MAX_VERSION = creq.VERSIONS[API_KEY]
RAW = True
DENIED = int(ErrorCode.cluster_authorization_failed)


async def handle(ctx: RequestContext, request: creq.StopReplicaRequest) -> Any:
    if not authz.allowed(ctx, authz.Operation.CLUSTER_ACTION, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        return creq.StopReplicaResponse(DENIED, [creq.PartitionError(p.topic, p.partition, DENIED)
                                                 for p in request.partitions])
    return await ctx.services.controller_requests.stop_replica(request)
