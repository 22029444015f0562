"""FindCoordinator (key 10), versions 0-6: which broker coordinates a consumer group.

A group's coordinator is the leader of its partition of ``__consumer_offsets``
(``(java_string_hashcode(group) & 0x7fffffff) % offsets.topic.num.partitions``). The first lookup creates that
topic (``ensure_offsets_topic``), so clients see a coordinator on their first try instead of
COORDINATOR_NOT_AVAILABLE retries. v0-v3 look up one key; v4+ batch ``coordinator_keys`` and answer each key
on its own.

Key type 1 (transactional id): odradek has no transaction coordinator, so it answers COORDINATOR_NOT_AVAILABLE
with an error message, which is what Kafka answers while ``__transaction_state`` has no available leader;
transactional producers therefore fail by their own timeout rather than on a protocol error. Any other key
type gets INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from odradek.broker.apis import RequestContext, fit, nested
from odradek.broker.group.config import OFFSETS_TOPIC
from odradek.errors import ErrorCode, KafkaError

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
            throttle_time=datetime.timedelta(0),
            coordinators=tuple(
                coordinator(key=key, error_code=err, error_message=msg, node_id=node, host=host, port=port)
                for key, (err, msg, node, host, port) in zip(keys, answers, strict=True)
            ),
        )
    err, msg, node, host, port = answers[0]
    return fit(
        ctx.response_class,
        throttle_time=datetime.timedelta(0),
        error_code=err,
        error_message=msg,
        node_id=node,
        host=host,
        port=port,
    )


def _error(code: ErrorCode, message: str | None = None) -> _Answer:
    return code, message, -1, "", -1


async def _find(ctx: RequestContext, key_type: int, keys: list[str]) -> list[_Answer]:
    if key_type == KEY_TYPE_TRANSACTION:
        return [_error(ErrorCode.coordinator_not_available, "odradek has no transaction coordinator") for _ in keys]
    if key_type != KEY_TYPE_GROUP:
        return [_error(ErrorCode.invalid_request, f"unknown coordinator key type {key_type}") for _ in keys]
    services = ctx.services
    if services.metadata.partition_count(OFFSETS_TOPIC) is None:
        try:
            await services.topics.ensure_offsets_topic()
        except KafkaError as exc:
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc)
            return [_error(ErrorCode.coordinator_not_available, str(exc)) for _ in keys]
    answers: list[_Answer] = []
    for key in keys:
        leader = services.metadata.leader_for(OFFSETS_TOPIC, services.groups.partition_for(key))
        endpoint = services.metadata.endpoint(leader) if leader is not None else None
        if leader is None or endpoint is None:
            answers.append(_error(ErrorCode.coordinator_not_available))
        else:
            answers.append((ErrorCode.none, None, leader, endpoint[0], endpoint[1]))
    return answers
