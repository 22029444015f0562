"""StopReplica (key 5), version 3 only: Kafka's binary format, flexible, per-partition delete flag.

See :mod:`odradek.controller.requests` for why v3 and how its per-partition flags map onto one; a request at any
other version closes the connection with one log line, as Kafka's broker closes it. Stops replicating partitions:
the fetcher lets go and the partition stops leading; with ``delete_partitions`` its log is deleted from disk (topic
deletion, reassignment away from this broker). Older controller epochs get STALE_CONTROLLER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.apis import RequestContext
from odradek.controller import requests as creq

API_KEY = creq.STOP_REPLICA
MIN_VERSION = MAX_VERSION = creq.VERSIONS[API_KEY]
RAW = True


async def handle(ctx: RequestContext, request: creq.StopReplicaRequest) -> Any:
    return await ctx.services.controller_requests.stop_replica(request)
