"""Fetch (key 1), versions 4-16.

Consumers read whole batches up to the high watermark; a follower (replica id >= 0) reads up to the log end and its
fetch offset tells the leader how far it has replicated. The request's ``max_bytes`` and each partition's
``partition_max_bytes`` bound the response, except that the first batch of the first partition with data is always
returned whole (KIP-74), so one oversized batch can never stall a consumer. If fewer than ``min_bytes`` are
available, the request waits until enough data is there or ``max_wait_ms`` passes, woken, never polling: a
follower's fetch by any append (or a leader change), a consumer's by the high watermark moving (Kafka's
DelayedFetch); one partition's event wakes the whole request, which re-reads every partition.
``isolation_level`` 1 (READ_COMMITTED) reads only below the last stable offset and returns, per partition, the
aborted transactions overlapping the returned range (from the partition's ``.txnindex`` files, as
Kafka's collectAbortedTxns), which the consumer uses to drop aborted records; such a fetch waits for the last
stable offset to move (a marker replicated), not for every append. READ_UNCOMMITTED answers a null aborted list.
Every response carries the last stable offset. Incremental fetch sessions (KIP-227) are not created: the session
id is 0, so clients send full requests. Topics are named by id from v13. Record bytes go to the socket as they lie
in the log, never copied by the encoder.

Client quotas (``consumer_byte_rate``) apply to consumers, never to followers, as Kafka's KafkaApis applies them: a
consumer's ``max_bytes`` is capped at what its quota allows in the whole window, the response's size is recorded,
and a response that takes the client over its quota is replaced by an empty one carrying the throttle time (the
recording taken back: the data was not sent); the connection is then muted that long (KIP-219).

With an authorizer (as Kafka's KafkaApis): a follower's fetch needs CLUSTER_ACTION on the Cluster, else every
partition gets TOPIC_AUTHORIZATION_FAILED; a consumer needs READ on each topic, else its partitions get
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import Encoded, RequestContext
from odradek.broker.replica import Partition
from odradek.errors import ErrorCode, KafkaError
from odradek.placement.model import TopicPartition
from odradek.protocol.encoders import FetchPartitionResult, encode_fetch_response

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 16
READ_COMMITTED = 1


def _replica_id(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None and state.replica_id >= 0:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1))


async def handle(ctx: RequestContext, request: Any) -> Encoded:
    services = ctx.services
    replica_id = _replica_id(request)
    wanted: list[tuple[str, uuid.UUID, list[Any]]] = []
    unknown_ids: list[tuple[uuid.UUID, list[Any]]] = []
    for t in request.topics:
        if ctx.api_version >= 13:
            topic_id: uuid.UUID = t.topic_id or uuid.UUID(int=0)
            meta = services.metadata.topic_by_id(topic_id)
            if meta is None:
                unknown_ids.append((topic_id, list(t.partitions)))
                continue
            name: str = meta.name
        else:
            name = t.topic
            meta = services.metadata.topics.get(name)
            topic_id = meta.topic_id if meta is not None else uuid.UUID(int=0)
        wanted.append((name, topic_id, list(t.partitions)))
    refused: list[tuple[str, uuid.UUID, list[Any]]] = []
    if services.authorizer is not None:
        wanted, refused = _authorized(ctx, replica_id, wanted)

    committed = replica_id < 0 and getattr(request, "isolation_level", 0) == READ_COMMITTED
    max_bytes, min_bytes = request.max_bytes, request.min_bytes
    if replica_id < 0:
        max_bytes = int(min(max_bytes, services.quotas.fetch_limit(ctx.principal, ctx.client_id)))
        min_bytes = min(min_bytes, max_bytes)
    deadline = asyncio.get_running_loop().time() + request.max_wait.total_seconds()
    while True:
        topics, total, parts = _read_all(ctx, wanted, replica_id, max_bytes, committed)
        remaining = deadline - asyncio.get_running_loop().time()
        if total >= min_bytes or remaining <= 0 or not parts:
            break
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for p, seen_lso in parts:
            if committed:
                p.add_stable_waiter(woken, seen_lso)
            elif replica_id >= 0:
                p.add_data_waiter(woken)
            else:
                p.add_visible_waiter(woken)
        try:
            await asyncio.wait_for(woken, remaining)
        except TimeoutError:
            pass
        finally:
            for p, _ in parts:
                if committed:
                    p.remove_stable_waiter(woken)
                elif replica_id >= 0:
                    p.remove_data_waiter(woken)
                else:
                    p.remove_visible_waiter(woken)
    for name, topic_id, partitions in refused:
        topics.append((name, topic_id, [FetchPartitionResult(p.partition, int(ErrorCode.topic_authorization_failed))
                                        for p in partitions]))
    for topic_id, partitions in unknown_ids:
        topics.append(
            ("", topic_id, [FetchPartitionResult(p.partition, int(ErrorCode.unknown_topic_id)) for p in partitions])
        )
    encoded = encode_fetch_response(ctx.api_version, topics)
    if replica_id < 0:
        throttle = services.quotas.throttle_fetch(ctx.principal, ctx.client_id, sum(len(b) for b in encoded))
        if throttle > 0:
            ctx.throttle_ms = throttle
            return Encoded(encode_fetch_response(ctx.api_version, [], throttle_ms=throttle))
        for name, _topic_id, results in topics:
            for result in results:
                if result.size:
                    services.stats.sent(name, result.size)
    return Encoded(encoded)


def _authorized(ctx: RequestContext, replica_id: int, wanted: list[tuple[str, uuid.UUID, list[Any]]],
                ) -> tuple[list[tuple[str, uuid.UUID, list[Any]]], list[tuple[str, uuid.UUID, list[Any]]]]:
    if replica_id >= 0:
        if authz.allowed(ctx, authz.Operation.CLUSTER_ACTION, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
            return wanted, []
        return [], wanted
    return authz.partition_by_authorized(ctx, authz.Operation.READ, authz.ResourceType.TOPIC, wanted,
                                         lambda w: w[0])


def _read_all(
    ctx: RequestContext, wanted: list[tuple[str, uuid.UUID, list[Any]]], replica_id: int, max_bytes: int,
    committed: bool,
) -> tuple[list[tuple[str, uuid.UUID, list[FetchPartitionResult]]], int, list[tuple[Partition, int]]]:
    services = ctx.services
    out: list[tuple[str, uuid.UUID, list[FetchPartitionResult]]] = []
    budget = max_bytes
    total = 0
    waitable: list[tuple[Partition, int]] = []
    for name, topic_id, partitions in wanted:
        results: list[FetchPartitionResult] = []
        out.append((name, topic_id, results))
        for fp in partitions:
            result = FetchPartitionResult(fp.partition)
            results.append(result)
            try:
                part = services.replicas.leader_partition(name, fp.partition, getattr(fp, "current_leader_epoch", -1))
                plog = part.log
                if replica_id >= 0:
                    part.record_follower_fetch(replica_id, fp.fetch_offset, getattr(fp, "log_start_offset", -1))
                    limit = None
                else:
                    limit = part.high_watermark
                read = plog.read(
                    fp.fetch_offset, min(fp.partition_max_bytes, max(budget, 0)), limit, min_one=total == 0,
                    read_committed=committed,
                )
                result.records = read.buffers
                result.size = read.size
                result.aborted_transactions = read.aborted_transactions
                total += read.size
                budget -= read.size
                waitable.append((part, read.last_stable_offset))
            except KafkaError as exc:
                result.error_code = int(exc.code)
                part_or_none = services.replicas.get(TopicPartition(name, fp.partition))
                if part_or_none is None:
                    continue
                part = part_or_none
            result.high_watermark = part.high_watermark
            result.last_stable_offset = part.last_stable_offset
            result.log_start_offset = part.log.log_start_offset
            if committed and result.aborted_transactions is None:
                result.aborted_transactions = []
    return out, total, waitable
