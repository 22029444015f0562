"""CreatePartitions (key 37), versions 0-3.

Raises a topic's partition count. As Kafka: INVALID_PARTITIONS when the new count is not larger ("Topic currently
has 3 partitions, which is higher than the requested 2."), UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT
for an assignment of the wrong size or naming unknown brokers, INVALID_REQUEST for a topic named twice. New
partitions keep the topic's replication factor and are placed by Kafka's algorithm from the next partition id.
``validate_only`` checks without changing anything. The answer waits within ``timeout_ms`` for the new partitions
to reach this broker's metadata, as CreateTopics does. With an authorizer each topic needs ALTER, else
TOPIC_AUTHORIZATION_FAILED ("The topic authorization is failed.", Kafka's words).
"""

from __future__ import annotations

import collections
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, deadline_of, fit, nested, remaining_s
from odradek.errors import ErrorCode, KafkaError

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    deadline = deadline_of(request.timeout)
    result_cls = nested(ctx, "CreatePartitionsTopicResult")
    counts = collections.Counter(t.name for t in request.topics)
    results = []
    for t in request.topics:
        error, message = ErrorCode.none, None
        try:
            if counts[t.name] > 1:
                raise KafkaError(ErrorCode.invalid_request, f"Duplicate topic in request: {t.name}")
            if not authz.allowed(ctx, authz.Operation.ALTER, authz.ResourceType.TOPIC, t.name):
                raise KafkaError(ErrorCode.topic_authorization_failed, "The topic authorization is failed.")
            record = await services.topics.topic_record(t.name)
            if record is None:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{t.name}' does not exist.")
            current = len(record.assignment)
            if t.count < current:
                raise KafkaError(
                    ErrorCode.invalid_partitions,
                    f"Topic currently has {current} partitions, which is higher than the requested {t.count}.",
                )
            if t.count == current:
                raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {current} partitions.")
            new = services.topics.assign_new_partitions(record.assignment, t.count, t.assignments)
            if not request.validate_only:
                await services.topics.add_partitions(t.name, new, remaining_s(deadline))
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(result_cls(name=t.name, error_code=error, error_message=message))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, results=tuple(results))
