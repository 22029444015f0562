"""DeleteTopics (key 20), versions 1-6.

Deletes each named topic (by id from v6) with its data on disk; UNKNOWN_TOPIC_OR_PARTITION (or UNKNOWN_TOPIC_ID)
for topics that do not exist, TOPIC_DELETION_DISABLED when ``delete.topic.enable`` is false, and
INVALID_TOPIC_EXCEPTION for internal topics, which Kafka never lets clients delete. In a cluster the topic is marked
for deletion and the answer waits, within ``timeout_ms``, until it is gone from this broker's metadata
(REQUEST_TIMED_OUT past it; the deletion goes on); a timeout of 0 or less answers at once. With an authorizer (as
Kafka's KafkaApis) each topic needs DELETE, else TOPIC_AUTHORIZATION_FAILED; one named by id that the principal
may not DESCRIBE is answered without its name.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, deadline_of, fit, nested, remaining_s
from odradek.broker.topics import INTERNAL_TOPICS
from odradek.errors import ErrorCode, KafkaError

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    deadline = deadline_of(request.timeout)
    result_cls = nested(ctx, "DeletableTopicResult")
    if ctx.api_version >= 6:
        targets = [(t.name, t.topic_id) for t in request.topics]
    else:
        targets = [(name, None) for name in request.topic_names]
    results = []
    for name, topic_id in targets:
        error, message = ErrorCode.none, None
        try:
            if name is None:
                meta = services.metadata.topic_by_id(topic_id)
                if meta is None:
                    raise KafkaError(ErrorCode.unknown_topic_id)
                name = meta.name
                if not authz.allowed(ctx, authz.Operation.DESCRIBE, authz.ResourceType.TOPIC, name):
                    name = None
                    raise KafkaError(ErrorCode.topic_authorization_failed)
            if not authz.allowed(ctx, authz.Operation.DELETE, authz.ResourceType.TOPIC, name):
                raise KafkaError(ErrorCode.topic_authorization_failed)
            meta = services.metadata.topics.get(name)
            if meta is not None:
                topic_id = meta.topic_id
            if name in INTERNAL_TOPICS:
                raise KafkaError(ErrorCode.invalid_topic_exception, f"Topic {name} is an internal topic")
            await services.topics.delete_topic(name, remaining_s(deadline))
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(result_cls(name=name, topic_id=topic_id, error_code=error, error_message=message))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, responses=tuple(results))
