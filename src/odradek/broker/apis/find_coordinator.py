"""FindCoordinator (key 10), versions 0-6: which broker coordinates a consumer group or a transactional id.

Key type 0 (group): the leader of the group's partition of ``__consumer_offsets``
(``abs(javaHash(group)) % offsets.topic.num.partitions``). Key type 1 (transactional id, v1+): the leader of the
id's partition of ``__transaction_state`` (``abs(javaHash(id)) % transaction.state.log.num.partitions``); both as
:func:`odradek.placement.java.coordinator_partition` computes them. The first lookup of either kind creates its
internal topic (``ensure_offsets_topic`` / ``ensure_transaction_state_topic``), so clients see a coordinator on
their first try instead of COORDINATOR_NOT_AVAILABLE retries; a partition without a live leader is
COORDINATOR_NOT_AVAILABLE. v0-v3 look up one key; v4+ batch ``coordinator_keys`` and answer each key on its own.
Any other key type gets INVALID_REQUEST, as in Kafka. With an authorizer a group key needs DESCRIBE on the group
(else GROUP_AUTHORIZATION_FAILED), a transactional id DESCRIBE on it (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.group.config import OFFSETS_TOPIC
from odradek.broker.txn.config import TRANSACTION_STATE_TOPIC
from odradek.coordination.store import ConnectionLossError, SessionExpiredError
from odradek.errors import INVALID_REQUEST_MESSAGE, ErrorCode, KafkaError

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1

log = logging.getLogger(__name__)

_Answer = tuple[ErrorCode, str | None, int, str, int]


async def handle(ctx: RequestContext, request: Any) -> Any:
    key_type = request.key_type if ctx.api_version >= 1 else KEY_TYPE_GROUP
    keys = list(request.coordinator_keys) if ctx.api_version >= 4 else [request.key]
    answers = await _find(ctx, key_type, keys)
    if ctx.api_version >= 4:
        coordinator = nested(ctx, "Coordinator")
        return fit(
            ctx.response_class,
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                coordinator(key=key, error_code=err, error_message="" if err == ErrorCode.none else msg,
                            node_id=node, host=host, port=port)
                for key, (err, msg, node, host, port) in zip(keys, answers, strict=True)
            ),
        )
    err, msg, node, host, port = answers[0]
    return fit(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        error_code=err,
        error_message="NONE" if err == ErrorCode.none else msg,  # Kafka sends Errors.NONE's message, not null
        node_id=node,
        host=host,
        port=port,
    )


def _error(code: ErrorCode, message: str | None = None) -> _Answer:
    return code, message, -1, "", -1


async def _find(ctx: RequestContext, key_type: int, keys: list[str]) -> list[_Answer]:
    services = ctx.services
    partition_for: Callable[[str], int]
    if key_type == KEY_TYPE_GROUP:
        topic, ensure = OFFSETS_TOPIC, services.topics.ensure_offsets_topic
        partition_for = services.groups.partition_for
    elif key_type == KEY_TYPE_TRANSACTION:
        topic, ensure = TRANSACTION_STATE_TOPIC, services.topics.ensure_transaction_state_topic
        partition_for = services.transactions.partition_for
    else:
        return [_error(ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE) for _ in keys]
    if services.metadata.partition_count(topic) is None:
        try:
            await ensure()
        except (KafkaError, ConnectionLossError, SessionExpiredError) as exc:  # the store out of reach: retriable
            log.warning("cannot create %s: %s", topic, exc)
            return [_error(ErrorCode.coordinator_not_available, str(exc)) for _ in keys]
    answers: list[_Answer] = []
    resource_type = authz.ResourceType.GROUP if key_type == KEY_TYPE_GROUP else authz.ResourceType.TRANSACTIONAL_ID
    for key in keys:
        if not authz.allowed(ctx, authz.Operation.DESCRIBE, resource_type, key):
            refused = authz.ERROR_OF[resource_type]
            answers.append(_error(refused, authz.REFUSAL_MESSAGE[refused]))
            continue
        leader = services.metadata.leader_for(topic, partition_for(key))
        # the coordinator's address on the listener the client came through, as Kafka answers it
        endpoint = services.metadata.endpoint_on(leader, ctx.listener) if leader is not None else None
        if leader is None or endpoint is None:
            answers.append(_error(ErrorCode.coordinator_not_available))
        else:
            answers.append((ErrorCode.none, None, leader, endpoint[0], endpoint[1]))
    return answers
