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
Every response carries the last stable offset. Topics are named by id from v13. Record bytes go to the socket as
they lie in the log, never copied by the encoder.

Incremental fetch sessions (KIP-227, v7+): :mod:`odradek.broker.fetch_sessions` decides what a request is from its
session id and epoch. A full fetch with epoch 0 creates a session when the cache has a slot (the response carries
its id); an incremental fetch names only the partitions whose fetch state changed and those to forget, and the
response keeps only partitions with records, an error or a changed high watermark, last stable offset or log start
offset. A session error answers the error code at the top with no partitions. An incremental fetch reads only the
session's dirty partitions (those the request names, and those whose replica reported an append, a high watermark
move or a change of leadership, ISR or log since the fetcher was last told): every other partition would be answered
with nothing, so the fetch's cost follows what changed, not the session's size. It parks on the session, woken
through the replicas it watches, instead of on each partition.

Client quotas (``consumer_byte_rate``) apply to consumers, never to followers, as Kafka's KafkaApis applies them: a
consumer's ``max_bytes`` is capped at what its quota allows in the whole window, the response's size is recorded,
and a response that takes the client over its quota is replaced by an empty one carrying the throttle time (the
recording taken back: the data was not sent; a session is left as it was, as Kafka's throttled fetch context leaves
it); the connection is then muted that long (KIP-219).

With an authorizer (as Kafka's KafkaApis): a follower's fetch needs CLUSTER_ACTION on the Cluster, else every
partition gets TOPIC_AUTHORIZATION_FAILED; a consumer needs READ on each topic, else its partitions get
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.broker import authz
from odradek.broker.apis import Encoded, RequestContext
from odradek.broker.fetch_sessions import (
    APPEND,
    HIGH_WATERMARK,
    INVALID_SESSION_ID,
    REPLICA,
    SESSIONLESS,
    CachedPartition,
    ContextKind,
    FetchSession,
    TopicKey,
)
from odradek.broker.log.segment import WouldBlock
from odradek.broker.replica import Partition
from odradek.broker.replica_manager import ReplicaManager
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
    version = ctx.api_version
    replica_id = _replica_id(request)
    by_id = version >= 13
    cache = services.fetch_sessions
    context = SESSIONLESS
    if version >= 7 and cache is not None:
        context = cache.new_context(
            request.session_id, request.session_epoch, by_id, _requested(request, by_id), _forgotten(request, by_id)
        )
        if context.kind is ContextKind.ERROR:
            return Encoded(encode_fetch_response(version, [], error_code=context.error_code))
    session = context.session
    wanted: list[tuple[str, uuid.UUID, Sequence[Any]]] = []
    unknown_ids: list[tuple[uuid.UUID, Sequence[Any]]] = []
    refused: list[tuple[str, uuid.UUID, Sequence[Any]]] = []
    if session is None:
        for t in request.topics:
            _want(services, (t.topic_id or uuid.UUID(int=0)) if by_id else t.topic, t.partitions, by_id, wanted,
                  unknown_ids)
        if services.authorizer is not None:
            wanted, refused = _authorized(ctx, replica_id, wanted)
    elif services.authorizer is not None and session.acl_index is not services.authorizer.index:
        session.acl_index = services.authorizer.index
        session.mark_all_dirty()  # the ACLs changed: every partition is checked again

    committed = replica_id < 0 and getattr(request, "isolation_level", 0) == READ_COMMITTED
    max_bytes, min_bytes = request.max_bytes, request.min_bytes
    quota_limited = False
    if replica_id < 0:
        allowance = services.quotas.fetch_limit(ctx.principal, ctx.client_id)
        quota_limited = allowance != float("inf")
        max_bytes = int(min(max_bytes, allowance))
        min_bytes = min(min_bytes, max_bytes)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait.total_seconds()
    seen: list[tuple[CachedPartition, Partition, bool]] = []
    while True:
        if session is not None:
            wanted, unknown_ids = _session_wanted(services, session, by_id)
            if services.authorizer is not None:
                wanted, refused = _authorized(ctx, replica_id, wanted)
            seen = []
        topics, total, parts, cold = _read_all(ctx, wanted, replica_id, max_bytes, committed,
                                               None if session is None else seen)
        if cold:
            total = await _read_cold(cold, max_bytes - total, total, committed)
        if session is not None:
            for entry, part, _idle in seen:
                if entry.watched is not part:
                    part.watch(entry, session)
        remaining = deadline - loop.time()
        if total >= min_bytes or remaining <= 0:
            break
        woken: asyncio.Future[None] = loop.create_future()
        if session is not None:
            errors = sum(1 for _n, _i, results in topics for r in results if r.error_code)
            errors += sum(len(p) for _n, _i, p in refused) + sum(len(p) for _i, p in unknown_ids)
            if errors >= session.size:
                break  # every partition of the session failed: nothing to wait for
            if await _park_session(session, woken, replica_id, committed, remaining, services.replicas):
                break
            continue
        if not parts:
            break
        # a follower's fetch also answers when a partition it does not name yet gets an append
        parked = services.replicas.parked_fetches.park(replica_id, woken) if replica_id >= 0 else None
        for p, seen_lso in parts:
            if committed:
                p.add_stable_waiter(woken, seen_lso)
            elif replica_id >= 0:
                p.add_data_waiter(woken)
            else:
                p.add_visible_waiter(woken)
        # a timer on the waiter itself rather than asyncio.wait_for, whose relay through a second future costs
        # one more pass of a busy event loop between the wake-up and the response (on the replication path too)
        timer = loop.call_later(remaining, _wake_up, woken)
        try:
            await woken
        finally:
            timer.cancel()
            if parked is not None:
                services.replicas.parked_fetches.unpark(replica_id, parked)
            for p, _ in parts:
                if committed:
                    p.remove_stable_waiter(woken)
                elif replica_id >= 0:
                    p.remove_data_waiter(woken)
                else:
                    p.remove_visible_waiter(woken)
        if parked is not None and parked.answer_now:
            break
    # Kafka's FetchResponse.partitionResponse(partition, error): an empty aborted list, whatever the isolation
    for name, topic_id, partitions in refused:
        topics.append((name, topic_id, [FetchPartitionResult(p.partition, int(ErrorCode.topic_authorization_failed),
                                                             aborted_transactions=[]) for p in partitions]))
    for topic_id, partitions in unknown_ids:
        topics.append(("", topic_id, [FetchPartitionResult(p.partition, int(ErrorCode.unknown_topic_id),
                                                           aborted_transactions=[]) for p in partitions]))
    session_id = INVALID_SESSION_ID if session is None else session.id
    sized: list[Any] | None = None
    if replica_id < 0 and quota_limited:
        # Kafka sizes the response the fetch context would send before the session takes it in, and a throttled
        # fetch leaves the session as it was: the fetcher was told nothing.
        sized = encode_fetch_response(version, topics)
        size = sum(len(b) for b in sized)
        throttle = services.quotas.throttle_fetch(ctx.principal, ctx.client_id, size)
        if throttle > 0:
            ctx.throttle_ms = throttle
            return Encoded(encode_fetch_response(version, [], session_id=session_id, throttle_ms=throttle))
    if session is not None:
        topics = _changed_only(session, topics, by_id, seen)
    elif context.kind is ContextKind.FULL and cache is not None:
        session_id = cache.maybe_create(replica_id, by_id,
                                        _to_cache(wanted + refused, unknown_ids, topics, by_id))
    if replica_id < 0:
        for name, _topic_id, results in topics:
            for result in results:
                if result.size:
                    services.stats.sent(name, result.size)
    if sized is not None and session is None:
        return Encoded(sized)  # the response just sized, which is the one to send: no session changed it
    return Encoded(encode_fetch_response(version, topics, session_id=session_id))


def _authorized(ctx: RequestContext, replica_id: int, wanted: list[tuple[str, uuid.UUID, Sequence[Any]]],
                ) -> tuple[list[tuple[str, uuid.UUID, Sequence[Any]]], list[tuple[str, uuid.UUID, Sequence[Any]]]]:
    if replica_id >= 0:
        if authz.allowed(ctx, authz.Operation.CLUSTER_ACTION, authz.ResourceType.CLUSTER, authz.CLUSTER_NAME):
            return wanted, []
        return [], wanted
    return authz.partition_by_authorized(ctx, authz.Operation.READ, authz.ResourceType.TOPIC, wanted,
                                         lambda w: w[0])


def _want(
    services: Any, key: TopicKey, partitions: Sequence[Any], by_id: bool,
    wanted: list[tuple[str, uuid.UUID, Sequence[Any]]], unknown_ids: list[tuple[uuid.UUID, Sequence[Any]]],
) -> None:
    """Resolve a topic of the request (or of the session) to its name and id; an unknown id is answered at once."""
    if by_id:
        assert isinstance(key, uuid.UUID)
        meta = services.metadata.topic_by_id(key)
        if meta is None:
            unknown_ids.append((key, partitions))
            return
        wanted.append((meta.name, key, partitions))
    else:
        assert isinstance(key, str)
        meta = services.metadata.topics.get(key)
        wanted.append((key, meta.topic_id if meta is not None else uuid.UUID(int=0), partitions))


def _session_wanted(
    services: Any, session: FetchSession, by_id: bool,
) -> tuple[list[tuple[str, uuid.UUID, Sequence[Any]]], list[tuple[uuid.UUID, Sequence[Any]]]]:
    """The session's dirty partitions by topic, in the order they became dirty (a topic where its first one is)."""
    groups: dict[TopicKey, list[CachedPartition]] = {}
    for entry in session.dirty:
        group = groups.get(entry.key)
        if group is None:
            group = groups[entry.key] = []
        group.append(entry)
    wanted: list[tuple[str, uuid.UUID, Sequence[Any]]] = []
    unknown_ids: list[tuple[uuid.UUID, Sequence[Any]]] = []
    for key, entries in groups.items():
        _want(services, key, entries, by_id, wanted, unknown_ids)
    return wanted, unknown_ids


async def _park_session(session: FetchSession, woken: asyncio.Future[None], replica_id: int, committed: bool,
                        remaining: float, replicas: ReplicaManager) -> bool:
    """Wait until a partition the session watches has what this fetch waits for, or the wait is over. A fetch of
    the session still parked (a client that did not wait for its answer) answers now. True when a follower's
    fetch must answer now: a partition its session does not watch yet got an append."""
    previous = session.waiter
    if previous is not None and not previous.done():
        previous.set_result(None)
    session.waiter = woken
    session.wakes_on = (APPEND if replica_id >= 0 else HIGH_WATERMARK) | REPLICA
    session.read_committed = committed
    parked = replicas.parked_fetches.park(replica_id, woken) if replica_id >= 0 else None
    timer = asyncio.get_running_loop().call_later(remaining, _wake_up, woken)
    try:
        await woken
    finally:
        timer.cancel()
        if parked is not None:
            replicas.parked_fetches.unpark(replica_id, parked)
        if session.waiter is woken:
            session.waiter = None
    return parked is not None and parked.answer_now


def _requested(request: Any, by_id: bool) -> Iterator[tuple[TopicKey, CachedPartition]]:
    """An incremental request's partitions as session entries (consumed only when the request is incremental)."""
    for t in request.topics:
        key = (t.topic_id or uuid.UUID(int=0)) if by_id else t.topic
        for fp in t.partitions:
            yield key, _cached(fp)


def _forgotten(request: Any, by_id: bool) -> Iterator[tuple[TopicKey, int]]:
    for t in request.forgotten_topics_data or ():
        key = (t.topic_id or uuid.UUID(int=0)) if by_id else t.topic
        for index in t.partitions:
            yield key, int(index)


def _cached(fp: Any) -> CachedPartition:
    return CachedPartition(
        fp.partition, fp.fetch_offset, getattr(fp, "log_start_offset", -1), fp.partition_max_bytes,
        getattr(fp, "current_leader_epoch", -1),
    )


def _to_cache(
    wanted: list[tuple[str, uuid.UUID, Sequence[Any]]], unknown_ids: list[tuple[uuid.UUID, Sequence[Any]]],
    topics: list[tuple[str, uuid.UUID, list[FetchPartitionResult]]], by_id: bool,
) -> Iterator[tuple[TopicKey, CachedPartition]]:
    """A full fetch's partitions for its new session, each remembering what this response tells the fetcher.
    ``topics`` holds the results of ``wanted`` and then of ``unknown_ids``, in that order."""
    requests = [(name, topic_id, parts) for name, topic_id, parts in wanted]
    requests += [("", topic_id, parts) for topic_id, parts in unknown_ids]
    for (name, topic_id, parts), (_n, _i, results) in zip(requests, topics, strict=True):
        key: TopicKey = topic_id if by_id else name
        for fp, result in zip(parts, results, strict=True):
            cached = _cached(fp)
            cached.must_respond(result.error_code, result.high_watermark, result.last_stable_offset,
                                result.log_start_offset, 0)
            yield key, cached


def _changed_only(
    session: FetchSession, topics: list[tuple[str, uuid.UUID, list[FetchPartitionResult]]], by_id: bool,
    seen: list[tuple[CachedPartition, Partition, bool]],
) -> list[tuple[str, uuid.UUID, list[FetchPartitionResult]]]:
    """An incremental response: the partitions the fetcher must hear about (the session remembers what it was
    told). Partitions it leaves with nothing to read stop being dirty; those served records move to the back."""
    out: list[tuple[str, uuid.UUID, list[FetchPartitionResult]]] = []
    served: list[CachedPartition] = []
    for name, topic_id, results in topics:
        key: TopicKey = topic_id if by_id else name
        cached = session.topics.get(key)
        if cached is None:
            continue
        kept = []
        for r in results:
            entry = cached.get(r.index)
            if entry is None or entry.must_respond(r.error_code, r.high_watermark, r.last_stable_offset,
                                                   r.log_start_offset, r.size):
                kept.append(r)
                if r.size and entry is not None:
                    served.append(entry)
        if kept:
            out.append((name, topic_id, kept))
    session.settle((entry for entry, _part, idle in seen if idle), served)
    return out


def _wake_up(woken: asyncio.Future[None]) -> None:
    """A parked fetch's max wait is over: it reads once more and answers."""
    if not woken.done():
        woken.set_result(None)


def _read_all(
    ctx: RequestContext, wanted: list[tuple[str, uuid.UUID, Sequence[Any]]], replica_id: int, max_bytes: int,
    committed: bool, seen: list[tuple[CachedPartition, Partition, bool]] | None = None,
) -> tuple[list[tuple[str, uuid.UUID, list[FetchPartitionResult]]], int, list[tuple[Partition, int]],
           list[_ColdRead]]:
    """Read every wanted partition. A partition with nothing to read at its fetch offset is answered without a
    read. With ``seen`` (an incremental session's partitions, which are :class:`CachedPartition`) such a partition
    whose offsets the fetcher already knows gets no result at all, and ``seen`` collects each partition found
    with the replica serving it and whether it is now idle: nothing to read, no error, and (for a follower) the
    follower in the ISR, so its next fetches need not look until the replica reports an event. A read the page
    cache cannot serve is left to :func:`_read_cold` (its result is in place, without records yet)."""
    services = ctx.services
    replicas = services.replicas
    follower = replica_id >= 0
    now_ms = replicas.clock.monotonic_ms()
    out: list[tuple[str, uuid.UUID, list[FetchPartitionResult]]] = []
    budget = max_bytes
    total = 0
    waitable: list[tuple[Partition, int]] = []
    cold: list[_ColdRead] = []
    for name, topic_id, partitions in wanted:
        results: list[FetchPartitionResult] = []
        out.append((name, topic_id, results))
        for fp in partitions:
            offset = fp.fetch_offset
            result: FetchPartitionResult | None = None
            try:
                part = replicas.leader_partition(name, fp.partition, getattr(fp, "current_leader_epoch", -1))
                plog = part.log
                if follower:
                    part.record_follower_fetch(replica_id, offset, getattr(fp, "log_start_offset", -1))
                hw = plog.high_watermark
                start = plog.log_start_offset
                leo = plog.log_end_offset
                if follower and seen is not None and offset == leo and start <= offset and hw == fp.high_watermark \
                        and start == fp.leader_log_start_offset and not plog.offline:
                    # a caught-up follower's partition with nothing new: no result, and no last stable offset
                    # looked up (it moves only with the high watermark)
                    waitable.append((part, hw))
                    seen.append((fp, part, replica_id in part.isr))
                    continue
                lso = plog.last_stable_offset
                upper = leo if follower else (min(hw, lso) if committed else hw)
                if start <= offset <= leo and offset >= upper and not plog.offline:
                    waitable.append((part, lso))
                    if seen is not None:
                        seen.append((fp, part, not follower or replica_id in part.isr))
                    if seen is not None and hw == fp.high_watermark and lso == fp.last_stable_offset \
                            and start == fp.leader_log_start_offset:
                        continue
                    idle = FetchPartitionResult(fp.partition, 0, hw, lso, start)
                    if committed:
                        idle.aborted_transactions = []
                    results.append(idle)
                    continue
                throttled = follower and replicas.leader_quota.is_throttled(name, fp.partition)
                if throttled and replica_id not in part.isr and replicas.leader_quota.exceeded(now_ms):
                    # Kafka's shouldLeaderThrottle: a catching-up follower gets no records while over the rate
                    replicas.leader_quota.withheld += 1
                    waitable.append((part, lso))
                    if seen is not None:
                        seen.append((fp, part, False))
                    results.append(FetchPartitionResult(fp.partition, 0, hw, lso, start))
                    continue
                result = FetchPartitionResult(fp.partition)
                results.append(result)
                record_throttled = (lambda size: replicas.leader_quota.record(size, now_ms)) if throttled else None
                try:
                    read = plog.read(
                        offset, min(fp.partition_max_bytes, max(budget, 0)), None if follower else hw,
                        min_one=total == 0, read_committed=committed, nowait=True,
                    )
                except WouldBlock:  # on the disk, not in the page cache: read on a thread once the others are read
                    cold.append(_ColdRead(result, part, offset, fp.partition_max_bytes, None if follower else hw,
                                          follower, record_throttled))
                    waitable.append((part, lso))
                    if seen is not None:
                        seen.append((fp, part, False))
                    continue
                if record_throttled is not None:
                    record_throttled(read.size)
                result.records = read.buffers
                result.size = read.size
                result.aborted_transactions = read.aborted_transactions
                total += read.size
                budget -= read.size
                waitable.append((part, read.last_stable_offset))
                if seen is not None:
                    seen.append((fp, part, False))
            except KafkaError as exc:
                if result is None:
                    result = FetchPartitionResult(fp.partition)
                    results.append(result)
                result.error_code = int(exc.code)
                if exc.code == ErrorCode.unknown_topic_or_partition:
                    result.aborted_transactions = []  # Kafka's partitionResponse for an unknown partition
                part_or_none = replicas.get(TopicPartition(name, fp.partition))
                if part_or_none is None or not follower:
                    continue  # a consumer gets -1 offsets with an error, as Kafka's readFromLocalLog answers
                part = part_or_none
            result.high_watermark = part.high_watermark
            result.last_stable_offset = part.last_stable_offset
            result.log_start_offset = part.log.log_start_offset
            if committed and result.aborted_transactions is None:
                result.aborted_transactions = []
    return out, total, waitable, cold


@dataclass(slots=True)
class _ColdRead:
    """A partition's read that would have waited for the disk: the result to fill and how to read it."""

    result: FetchPartitionResult
    part: Partition
    offset: int
    max_bytes: int
    upper: int | None
    follower: bool
    record_throttled: Callable[[int], None] | None  # the replication throttle counts what a throttled read sends


async def _read_cold(cold: list[_ColdRead], budget: int, total: int, committed: bool) -> int:
    """Read on a worker thread what the page cache did not hold, in request order, within what is left of the
    response's ``budget``; returns the response's new total. A read that waits for the disk then stalls only this
    fetch, not every client and follower served by the event loop. The log's lock orders the read with appends,
    truncation and retention, so no deleted segment is read."""
    for c in cold:
        result = c.result
        plog = c.part.log
        try:
            read = await asyncio.to_thread(plog.read, c.offset, min(c.max_bytes, max(budget, 0)), c.upper,
                                           total == 0, committed)
        except KafkaError as exc:
            result.error_code = int(exc.code)
            if c.follower:  # a consumer gets -1 offsets with an error, as in _read_all
                result.high_watermark = c.part.high_watermark
                result.last_stable_offset = c.part.last_stable_offset
                result.log_start_offset = plog.log_start_offset
            if committed:
                result.aborted_transactions = []
            continue
        if c.record_throttled is not None:
            c.record_throttled(read.size)
        result.records = read.buffers
        result.size = read.size
        result.aborted_transactions = read.aborted_transactions
        result.high_watermark = read.high_watermark
        result.last_stable_offset = read.last_stable_offset
        result.log_start_offset = read.log_start_offset
        total += read.size
        budget -= read.size
    return total
