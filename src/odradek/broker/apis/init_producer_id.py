"""InitProducerId (key 22), versions 0-5.

Without a transactional id: an idempotent producer gets a fresh producer id with epoch 0, from durable blocks so ids
are never reused across restarts. As in Kafka, that holds also when it sends its current id and epoch (KIP-360,
v3+): only a transactional id's coordinator bumps epochs, since only it can fence the older epoch everywhere.

With a transactional id, the id's transaction coordinator answers (NOT_COORDINATOR elsewhere, as Kafka), as Kafka's
TransactionCoordinator does: a new id gets a producer id at epoch 0; a known one the same producer id with the epoch
bumped, which fences every older producer of that id; an ongoing transaction of the older producer is aborted first
(its epoch bumped, markers written) and the request answered CONCURRENT_TRANSACTIONS so the client retries and gets
the next epoch; PrepareCommit/PrepareAbort still completing is CONCURRENT_TRANSACTIONS; an exhausted epoch moves to
a new producer id. A KIP-360 client (v3+) sending its producer id and epoch recovers (the bump, or the same answer
again for a retried bump) unless another producer took over: PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). A
timeout beyond ``transaction.max.timeout.ms`` (or not positive) is INVALID_TRANSACTION_TIMEOUT; an empty id
INVALID_REQUEST; a producer id without an epoch (or the reverse) INVALID_REQUEST.

With an authorizer (as Kafka's KafkaApis): a transactional id needs WRITE (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE on the Cluster or WRITE on at
least one topic (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit
from odradek.broker.txn.decisions import to_client_error
from odradek.errors import ErrorCode

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.services.authorizer is not None:
        refused = _refusal(ctx, request.transactional_id)
        if refused is not None:
            return _answer(ctx, refused, -1, -1)
    pid = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if request.transactional_id is not None:
        if (pid == -1) != (epoch == -1):
            return _answer(ctx, ErrorCode.invalid_request, -1, -1)
        expected = None if pid == -1 else (pid, epoch)
        timeout_ms = round(request.transaction_timeout.total_seconds() * 1000)
        error, new_pid, new_epoch = await ctx.services.transactions.coordinator.init_producer_id(
            request.transactional_id, timeout_ms, expected)
        return _answer(ctx, to_client_error(error, ctx.api_version >= 4), new_pid, new_epoch)
    return _answer(ctx, ErrorCode.none, await ctx.services.producer_ids.next_id(), 0)


def _refusal(ctx: RequestContext, transactional_id: str | None) -> ErrorCode | None:
    """Kafka's checks: WRITE on the transactional id; for an idempotent producer, IDEMPOTENT_WRITE on the Cluster
    or WRITE on at least one topic (KIP-679)."""
    if transactional_id is not None:
        if authz.allowed(ctx, authz.Operation.WRITE, authz.ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if authz.allowed(ctx, authz.Operation.IDEMPOTENT_WRITE, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME) or \
            authz.allowed_any_of_type(ctx, authz.Operation.WRITE, authz.ResourceType.TOPIC):
        return None
    return ErrorCode.cluster_authorization_failed


def _answer(ctx: RequestContext, error: ErrorCode, pid: int, epoch: int) -> Any:
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=error, producer_id=pid,
               producer_epoch=epoch)
