"""AddOffsetsToTxn (key 25), versions 0-4.

A producer about to commit a consumer group's offsets inside its transaction (``send_offsets_to_transaction``) adds
the group's partition of ``__consumer_offsets`` to the transaction, exactly as AddPartitionsToTxn adds a partition,
with the same answers: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS. The offsets themselves then go to the group
coordinator with TxnOffsetCommit, and become visible when the transaction's marker lands on that partition. With an
authorizer: WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (else
GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit
from odradek.broker.group.config import OFFSETS_TOPIC
from odradek.broker.txn.decisions import to_client_error
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    if not authz.allowed(ctx, authz.Operation.WRITE, authz.ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE,
                   error_code=ErrorCode.transactional_id_authorization_failed)
    if not authz.allowed(ctx, authz.Operation.READ, authz.ResourceType.GROUP, request.group_id):
        return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed)
    tp = TopicPartition(OFFSETS_TOPIC, services.groups.partition_for(request.group_id))
    error = await services.transactions.coordinator.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [tp])
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, error_code=to_client_error(error, ctx.api_version >= 2))
