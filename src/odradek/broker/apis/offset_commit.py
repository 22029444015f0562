"""OffsetCommit (key 8), versions 2-9: store a group's consumed positions in ``__consumer_offsets``.

A commit from a group member is checked against the group's generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
REBALANCE_IN_PROGRESS while awaiting sync); generation -1 on an Empty or unknown group is a standalone
consumer using Kafka only for storage. The answer comes once the offsets are committed in
``__consumer_offsets``. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, metadata over
``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE. v2-v4's retention_time is ignored (Kafka 2.1+
ignores it too for new commits; offsets expire by ``offsets.retention.minutes``). v6 adds the leader epoch, v7
group.instance.id. v10 (topic ids) is not served: the broker's metadata is looked up by topic name.

With an authorizer (as Kafka's KafkaApis): the group needs READ, else every partition gets
GROUP_AUTHORIZATION_FAILED; each topic needs READ, else its partitions get TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from odradek.broker import authz
from odradek.broker.apis import NO_THROTTLE, RequestContext, fit, nested
from odradek.broker.group.results import OffsetCommit
from odradek.errors import ErrorCode
from odradek.placement.model import TopicPartition

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


async def handle(ctx: RequestContext, request: Any) -> Any:
    refused = refused_commit(ctx, request.group_id, None, request.topics)
    if refused is not None:
        return commit_response(ctx, request.topics, refused, "OffsetCommitResponseTopic",
                               "OffsetCommitResponsePartition")
    commits, errors = requested_commits(ctx, request.topics)
    if commits:
        errors.update(
            await ctx.services.groups.commit_offsets(
                request.group_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                request.generation_id_or_member_epoch,
                commits,
            )
        )
    return commit_response(ctx, request.topics, errors, "OffsetCommitResponseTopic", "OffsetCommitResponsePartition")


def refused_commit(ctx: RequestContext, group_id: str, transactional_id: str | None,
                   topics: Any) -> dict[TopicPartition, ErrorCode] | None:
    """The whole request's refusal, one error per partition, when the principal may not write for the
    transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) or read the group (GROUP_AUTHORIZATION_FAILED)."""
    if ctx.services.authorizer is None:
        return None
    code = None
    if transactional_id is not None and not authz.allowed(ctx, authz.Operation.WRITE,
                                                           authz.ResourceType.TRANSACTIONAL_ID, transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
    elif not authz.allowed(ctx, authz.Operation.READ, authz.ResourceType.GROUP, group_id):
        code = ErrorCode.group_authorization_failed
    if code is None:
        return None
    return {TopicPartition(t.name, p.partition_index): code for t in topics for p in t.partitions}


def requested_commits(
    ctx: RequestContext, topics: Any
) -> tuple[dict[TopicPartition, OffsetCommit], dict[TopicPartition, ErrorCode]]:
    """The offsets to commit, and TOPIC_AUTHORIZATION_FAILED for topics the principal may not READ, then
    UNKNOWN_TOPIC_OR_PARTITION for partitions the metadata does not have (Kafka checks both before the coordinator
    sees a commit, plain or transactional)."""
    metadata = ctx.services.metadata
    errors: dict[TopicPartition, ErrorCode] = {}
    commits: dict[TopicPartition, OffsetCommit] = {}
    readable = authz.authorized_names(ctx, authz.Operation.READ, authz.ResourceType.TOPIC, (t.name for t in topics))
    for topic in topics:
        count = metadata.partition_count(topic.name)
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if topic.name not in readable:
                errors[tp] = ErrorCode.topic_authorization_failed
            elif count is None or not 0 <= p.partition_index < count:
                errors[tp] = ErrorCode.unknown_topic_or_partition
            else:
                commits[tp] = OffsetCommit(
                    p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata
                )
    return commits, errors


def commit_response(ctx: RequestContext, topics: Any, errors: dict[TopicPartition, ErrorCode], topic_class: str,
                    partition_class: str) -> Any:
    """One error per requested partition, in the request's order (OffsetCommit's and TxnOffsetCommit's shape)."""
    topic_cls = nested(ctx, topic_class)
    partition_cls = nested(ctx, partition_class)
    return fit(
        ctx.response_class,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            topic_cls(
                name=topic.name,
                partitions=tuple(
                    partition_cls(
                        partition_index=p.partition_index,
                        error_code=errors[TopicPartition(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ),
            )
            for topic in topics
        ),
    )
