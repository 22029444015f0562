"""InitProducerId (key 22), versions 0-5.

Gives an idempotent producer a fresh producer id with epoch 0, from durable blocks so ids are never reused across
restarts. A producer that re-initialises with its current id and epoch (KIP-360, v3+) gets the same id with the
epoch bumped, or a new id when the epoch would overflow. Transactional ids are refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED: odradek has no transaction coordinator.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.apis import NO_THROTTLE, RequestContext, fit
from odradek.errors import ErrorCode

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5

MAX_EPOCH = 32767


async def handle(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        return fit(
            ctx.response_class, throttle_time=NO_THROTTLE,
            error_code=ErrorCode.transactional_id_authorization_failed, producer_id=-1, producer_epoch=-1,
        )
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if pid >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        new_pid, new_epoch = pid, epoch + 1
    else:
        new_pid, new_epoch = await ctx.services.producer_ids.next_id(), 0
    return fit(
        ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        producer_id=new_pid, producer_epoch=new_epoch,
    )
