"""LeaderAndIsr (key 4), version 4 only: Kafka's binary format, the first flexible version, before topic ids.

See :mod:`odradek.controller.requests` for why v4; a request at any other version closes the connection with one log
line, as Kafka's broker closes it. Applies the controller's leadership decisions: become leader (stop fetching, take
the ISR and its znode version) or follower (fetch from the new leader after truncating by leader epoch). A request
from an older controller epoch gets STALE_CONTROLLER_EPOCH and changes nothing — a zombie controller is powerless; a
partition whose leader epoch is older than ours is left alone (STALE_CONTROLLER_EPOCH for it); one this broker does
not replicate gets UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.apis import RequestContext
from odradek.controller import requests as creq

API_KEY = creq.LEADER_AND_ISR
MIN_VERSION = MAX_VERSION = creq.VERSIONS[API_KEY]
RAW = True


async def handle(ctx: RequestContext, request: creq.LeaderAndIsrRequest) -> Any:
    return await ctx.services.controller_requests.leader_and_isr(request)
