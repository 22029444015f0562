"""StopReplica (key 5), version 0 of odradek's own encoding (Kafka 4 removed the API; see controller.requests).

Stops replicating partitions: the fetcher lets go and the partition stops leading; with ``delete_partitions`` its
log is deleted from disk (topic deletion, reassignment away from this broker). Older controller epochs get
STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.apis import RequestContext
from odradek.controller import requests as creq

API_KEY = creq.STOP_REPLICA
MIN_VERSION = MAX_VERSION = creq.API_VERSION
RAW = True


async def handle(ctx: RequestContext, request: creq.StopReplicaRequest) -> Any:
    return await ctx.services.controller_requests.stop_replica(request)
