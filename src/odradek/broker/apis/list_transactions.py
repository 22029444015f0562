"""ListTransactions (key 66), versions 0-1.

Every transactional id this broker coordinates (admin clients ask every broker and merge), filtered by state names
and producer ids when given; v1's ``duration_filter`` keeps only transactions running longer than that many ms.
Unknown state names come back in ``unknown_state_filters``; while a partition is loading the answer is
COORDINATOR_LOAD_IN_PROGRESS, as Kafka's. With an authorizer only the ids the principal may DESCRIBE are listed.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    duration = getattr(request, "duration_filter", -1)
    error, listings, unknown = ctx.services.transactions.coordinator.list_transactions(
        set(request.producer_id_filters), set(request.state_filters), duration)
    visible = authz.authorized_names(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TRANSACTIONAL_ID,
                                     (t.transactional_id for t in listings), filtering=True)
    listings = [t for t in listings if t.transactional_id in visible]
    state_cls = nested(ctx, "TransactionState")
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=error, unknown_state_filters=tuple(unknown),
               transaction_states=tuple(state_cls(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                                  transaction_state=t.state) for t in listings))
