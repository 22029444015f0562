"""EndTxn (key 26), versions 0-4.

Commits or aborts the producer's ongoing transaction, as Kafka's coordinator does: PrepareCommit/PrepareAbort is
written to ``__transaction_state`` (acks=all) and the client answered once it is durable; the COMMIT/ABORT markers
are then written to every partition of the transaction and CompleteCommit/CompleteAbort recorded after the last, in
the background (a coordinator that fails over meanwhile finishes the job when the next one loads the partition).
Answers: INVALID_PRODUCER_ID_MAPPING (a producer id not the transactional id's, or an unknown id), PRODUCER_FENCED
(INVALID_PRODUCER_EPOCH before v2), INVALID_TXN_STATE (nothing to end, or ending the other way than a transaction
already ending), CONCURRENT_TRANSACTIONS (a retry while markers are being written), NONE for a retry of an end that
completed. v5 (KIP-890 part 2, an epoch bump per transaction) is not served. With an authorizer the transactional
id needs WRITE, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit
from odradek.broker.txn.decisions import to_client_error
from odradek.errors import ErrorCode

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not authz.allowed(ctx, authz.Operation.WRITE, authz.ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE,
                   error_code=ErrorCode.transactional_id_authorization_failed, producer_id=-1, producer_epoch=-1)
    error, pid, epoch = await ctx.services.transactions.coordinator.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=to_client_error(error, ctx.api_version >= 2),
               producer_id=pid, producer_epoch=epoch)
