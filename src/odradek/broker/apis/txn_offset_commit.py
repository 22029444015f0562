"""TxnOffsetCommit (key 28), versions 0-4: a transactional producer commits a consumer group's offsets inside its
transaction (``send_offsets_to_transaction``).

Sent to the group's coordinator after AddOffsetsToTxn put the group's ``__consumer_offsets`` partition in the
transaction. The offsets are appended there as the producer's transactional batch (its id and epoch, Kafka's
offset-commit record format) and stay invisible to OffsetFetch until the transaction's COMMIT marker reaches that
partition; an ABORT drops them. v3 (KIP-447) adds generation_id, member_id and group_instance_id: when any is set
the member is checked as an OffsetCommit would be (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION), so
a zombie from an older generation cannot commit; without them (v0-v2) the group's membership is not consulted.
Before appending (every time: odradek does not consult the partition's producer state first, as Kafka does to
skip the round trip), the transaction coordinator is asked whether the partition is in the producer's transaction
(KIP-890 part 1, as a transactional Produce is): a request outside one gets that answer's code
(INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH, ...). Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION.
v4 differs from v3 only in the error codes a client may see (TRANSACTION_ABORTABLE); v5 (KIP-890 part 2, the
partition added implicitly) is not served: the coordinator implements transaction version 1.

With an authorizer (as Kafka's KafkaApis): WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
for every partition), READ on the group (else GROUP_AUTHORIZATION_FAILED), READ on each topic (else
TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.apis import RequestContext
from odradek.broker.apis.offset_commit import commit_response, refused_commit, requested_commits
from odradek.broker.group.config import OFFSETS_TOPIC
from odradek.errors import ErrorCode

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    groups = ctx.services.groups
    refused = refused_commit(ctx, request.group_id, request.transactional_id, request.topics)
    if refused is not None:
        return commit_response(ctx, request.topics, refused, "TxnOffsetCommitResponseTopic",
                               "TxnOffsetCommitResponsePartition")
    commits, errors = requested_commits(ctx, request.topics)
    if commits:
        code = await _verify(ctx, request)
        if code is not ErrorCode.none:
            errors.update(dict.fromkeys(commits, code))
        else:
            errors.update(
                await groups.commit_txn_offsets(
                    request.group_id,
                    request.producer_id,
                    request.producer_epoch,
                    getattr(request, "member_id", ""),
                    getattr(request, "group_instance_id", None),
                    getattr(request, "generation_id", -1),
                    commits,
                )
            )
    return commit_response(ctx, request.topics, errors, "TxnOffsetCommitResponseTopic",
                           "TxnOffsetCommitResponsePartition")


async def _verify(ctx: RequestContext, request: Any) -> ErrorCode:
    """Is the group's offsets partition in this producer's ongoing transaction? Only the coordinator knows; a
    group this broker does not coordinate is answered by the group coordinator's own check instead."""
    groups = ctx.services.groups
    if not request.group_id or not groups.owns(groups.partition_for(request.group_id)):
        return ErrorCode.none
    code: ErrorCode = await ctx.services.transactions.verify_partition(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        OFFSETS_TOPIC,
        groups.partition_for(request.group_id),
    )
    # Kafka's maybeConvertOffsetCommitError: older clients retry COORDINATOR_LOAD_IN_PROGRESS without a lookup,
    # but may not expect NETWORK_EXCEPTION from a commit.
    return ErrorCode.coordinator_load_in_progress if code is ErrorCode.network_exception else code
