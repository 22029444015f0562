"""DescribeProducers (key 61), version 0.

For each requested partition this broker hosts, as leader or follower (Kafka's ReplicaManager.activeProducerState
does not ask which): the producers its log knows (id, epoch, last sequence, last timestamp, the coordinator epoch of
their last marker, and the first offset of their open transaction or -1), from the partition's producer state, as
Kafka's ``kafka-transactions.sh describe-producers`` shows them. A partition hosted only elsewhere is
NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION; with an authorizer, a topic the
principal may not READ is TOPIC_AUTHORIZATION_FAILED (as Kafka's KafkaApis).
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.errors import ErrorCode, KafkaError

API_KEY = 61
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: RequestContext, request: Any) -> Any:
    producer_cls = nested(ctx, "ProducerState")
    partition_cls = nested(ctx, "PartitionResponse")
    topic_cls = nested(ctx, "TopicResponse")
    topics = []
    readable = authz.authorized_names(ctx, authz.Operation.READ, authz.ResourceType.TOPIC,
                                      (t.name for t in request.topics))
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            try:
                if topic.name not in readable:  # Kafka's message for the error
                    raise KafkaError(ErrorCode.topic_authorization_failed,
                                     authz.REFUSAL_MESSAGE[ErrorCode.topic_authorization_failed])
                part = ctx.services.replicas.partition(topic.name, index)  # a follower answers too, as in Kafka
            except KafkaError as exc:
                partitions.append(partition_cls(partition_index=index, error_code=exc.code,
                                                error_message=exc.message, active_producers=()))
                continue
            producers = tuple(
                producer_cls(producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                             last_sequence=e.last_sequence, last_timestamp=e.last_timestamp,
                             coordinator_epoch=e.coordinator_epoch, current_txn_start_offset=e.current_txn_first_offset)
                for e in part.log.producer_state.entries()
            )
            partitions.append(partition_cls(partition_index=index, error_code=ErrorCode.none, error_message=None,
                                            active_producers=producers))
        topics.append(topic_cls(name=topic.name, partitions=tuple(partitions)))
    return fit(ctx.response_class, throttle_time=NO_THROTTLE, topics=tuple(topics))
