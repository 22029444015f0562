"""DescribeTransactions (key 65), version 0.

For each transactional id this broker coordinates: its state (Kafka's names: Empty, Ongoing, PrepareCommit, ...),
producer id and epoch, timeout, start time (-1 in state Empty, as Kafka sends it) and the partitions still in the
transaction.
Ids of partitions coordinated elsewhere are NOT_COORDINATOR, of partitions being loaded COORDINATOR_LOAD_IN_PROGRESS,
unknown (or expiring) ids TRANSACTIONAL_ID_NOT_FOUND, an empty id INVALID_REQUEST. With an authorizer an id needs
DESCRIBE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and only the topics the principal may DESCRIBE are listed.
"""

from __future__ import annotations

import datetime
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.transactions.coordinator
    state_cls = nested(ctx, "TransactionState")
    topic_cls = nested(ctx, "TopicData")
    states = []
    for tid in request.transactional_ids:
        error, meta = coordinator.describe(tid)
        if not authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TRANSACTIONAL_ID, tid):
            error, meta = ErrorCode.transactional_id_authorization_failed, None
        if meta is None:
            # Kafka leaves the other fields at their schema defaults: "" and zeros
            states.append(state_cls(error_code=error, transactional_id=tid, transaction_state="",
                                    transaction_timeout=datetime.timedelta(0), transaction_start_time=_time(0),
                                    producer_id=0, producer_epoch=0, topics=()))
            continue
        by_topic: dict[str, list[int]] = {}
        visible = authz.authorized_names(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TOPIC,
                                         (tp.topic for tp in meta.partitions), filtering=True)
        for tp in sorted(p for p in meta.partitions if p.topic in visible):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        states.append(state_cls(
            error_code=error, transactional_id=tid, transaction_state=meta.state.kafka_name,
            transaction_timeout=datetime.timedelta(milliseconds=meta.txn_timeout_ms),
            transaction_start_time=_time(meta.txn_start_timestamp), producer_id=meta.producer_id,
            producer_epoch=meta.producer_epoch,
            topics=tuple(topic_cls(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        ))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, transaction_states=tuple(states))


def _time(ms: int) -> datetime.datetime:
    """kio's int64 timestamp field as a datetime; -1 (no transaction) is the millisecond before the epoch."""
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
