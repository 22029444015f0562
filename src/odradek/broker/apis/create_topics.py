"""CreateTopics (key 19), versions 2-7.

Validates each topic as Kafka does, with its codes and messages: INVALID_TOPIC_EXCEPTION for illegal or colliding
names, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (including more replicas than live
brokers), INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG for unknown or bad configs, INVALID_REQUEST for a topic named
twice or both a count and an assignment. -1 partitions or replication factor take ``num.partitions`` and
``default.replication.factor``. Replicas are placed by Kafka's assignment algorithm (rack-aware when every broker
has a rack). ``validate_only`` runs every check and creates nothing. v5+ responses carry the topic's resulting
configs, partition count and replication factor; v7 its topic id. In a cluster the answer waits, within the
request's ``timeout_ms``, until every new partition has a leader in this broker's metadata; past it the topic still
exists and the code is REQUEST_TIMED_OUT; with a timeout of 0 or less it answers as soon as the topic is written.
With an authorizer (as Kafka's KafkaApis) each topic needs CREATE on the Cluster or on the topic, else
TOPIC_AUTHORIZATION_FAILED; without DESCRIBE_CONFIGS on it its configs, partition count, replication factor and topic
id are not returned (-1s, the zero id, and the topic config error code TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import collections
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, deadline_of, fit, nested, remaining_s
from odradek.broker.topic_config import describe, validate_overrides
from odradek.errors import ErrorCode, KafkaError

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    deadline = deadline_of(request.timeout)
    result_cls = nested(ctx, "CreatableTopicResult")
    config_cls = nested(ctx, "CreatableTopicConfigs") if ctx.api_version >= 5 else None
    counts = collections.Counter(t.name for t in request.topics)
    names = set(counts)
    creatable = names if authz.allowed(ctx, authz.Operation.CREATE, authz.ResourceType.CLUSTER,
                                       authz.CLUSTER_NAME) else authz.authorized_names(
        ctx, authz.Operation.CREATE, authz.ResourceType.TOPIC, names)
    configs_visible = authz.authorized_names(ctx, authz.Operation.DESCRIBE_CONFIGS, authz.ResourceType.TOPIC, names)
    results = []
    for t in request.topics:
        error, message, topic_id = ErrorCode.none, None, None
        partitions, rf, described = -1, -1, ()  # Kafka answers a refused topic with no configs, not a null list
        try:
            if counts[t.name] > 1:
                raise KafkaError(
                    ErrorCode.invalid_request, f"Create topics request from client contains a duplicate topic {t.name}"
                )
            if t.name not in creatable:
                raise KafkaError(ErrorCode.topic_authorization_failed, "Authorization failed.")
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            chosen = await services.topics.check_new_topic(
                t.name, t.num_partitions, t.replication_factor, assignment or None, configs
            )
            if t.name in configs_visible:  # Kafka fills these in only for a principal that may see them
                partitions, rf = len(chosen), len(chosen[0])
            if not request.validate_only:
                record = await services.topics.create_topic(t.name, chosen, configs, remaining_s(deadline))
                topic_id = record.topic_id if t.name in configs_visible else None
            if config_cls is not None and t.name in configs_visible:
                described = tuple(
                    config_cls(
                        name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                        is_sensitive=e.sensitive,
                    )
                    for e in describe(validate_overrides(configs), services.config.topic_default_levels())
                )
        except KafkaError as exc:
            error, message = exc.code, exc.message
        results.append(
            result_cls(
                name=t.name, topic_id=topic_id, error_code=error, error_message=message,
                topic_config_error_code=0 if t.name in configs_visible else ErrorCode.topic_authorization_failed,
                num_partitions=partitions, replication_factor=rf, configs=described,
            )
        )
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, topics=tuple(results))
