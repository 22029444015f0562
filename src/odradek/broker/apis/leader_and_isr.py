"""LeaderAndIsr (key 4), version 4 only: Kafka's binary format, the first flexible version, before topic ids.

See :mod:`odradek.protocol.controller_requests` for why v4; a request at any other version closes the connection with
one log line, as Kafka's broker closes it. Applies the controller's leadership decisions: become leader (stop fetching,
take the ISR and its znode version) or follower (fetch from the new leader after truncating by leader epoch). A request
from an older controller epoch gets STALE_CONTROLLER_EPOCH and changes nothing — a zombie controller is powerless; a
partition whose leader epoch is older than ours is left alone (STALE_CONTROLLER_EPOCH for it); one this broker does not
replicate gets UNKNOWN_TOPIC_OR_PARTITION. With an authorizer, only a principal with CLUSTER_ACTION on the Cluster (the
brokers' own, a super user as in Kafka) is served; anyone else gets CLUSTER_AUTHORIZATION_FAILED and nothing changes.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import RequestContext
from odradek.errors import ErrorCode
from odradek.protocol import controller_requests as creq

API_KEY = creq.LEADER_AND_ISR
MIN_VERSION = MAX_VERSION = creq.VERSIONS[API_KEY]
RAW = True
DENIED = int(ErrorCode.cluster_authorization_failed)


async def handle(ctx: RequestContext, request: creq.LeaderAndIsrRequest) -> Any:
    if not authz.allowed(ctx, authz.Operation.CLUSTER_ACTION, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
        return creq.LeaderAndIsrResponse(DENIED, [creq.PartitionError(p.topic, p.partition, DENIED)
                                                  for p in request.partition_states])
    return await ctx.services.controller_requests.leader_and_isr(request)
