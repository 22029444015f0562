"""Followers replicate by fetching from their leaders: one fetcher task per source broker.

A partition joins its leader's fetcher in the *truncating* state. Before its first fetch the follower asks the
leader, with OffsetForLeaderEpoch, where its own latest epoch ended on the leader and truncates there (KIP-101 and
KIP-279: if the leader knows only an earlier epoch, truncate to the smaller of the two logs' ends for that epoch),
never blindly to its high watermark as the seeds' Kafka did — that is what loses acknowledged data when leaders
change twice in a row. Then it fetches from its log end with ``replica_id`` set, appends batches with the leader's
offsets, and takes the leader's high watermark (capped at its own log end). Errors back the fetcher off; a partition
fenced by a newer leader epoch waits for the controller's next LeaderAndIsr.

Fetches go through an incremental fetch session (KIP-227, :mod:`odradek.broker.fetch_session_client`) as Kafka's
replica fetchers do: after the first full fetch only partitions whose fetch offset, log start, leader epoch or size
limit changed are sent, partitions that leave the fetcher (or wait out a backoff or a truncation) are forgotten, and
the leader answers only partitions with records or a moved high watermark. A session error or a failed request makes
the next fetch a full one; a leader without sessions (``max.incremental.fetch.session.cache.slots=0``) gets full
fetches throughout.

A fetcher of tens of thousands of partitions does per fetch only what changed: it keeps what it fetches
(``_wanted``) between fetches and recomputes only the partitions something happened to (``_changed``: an answer
for it, a partition added or removed, a backoff or truncation begun or over), so an idle follower's fetch costs
the same for ten partitions as for a hundred thousand. Kafka's fetcher rebuilds its whole request every time;
Python cannot afford that walk at this scale. The exception is a follower throttle in force
(``follower.replication.throttled.rate``, :mod:`odradek.broker.replication_quota`): then each fetch looks at every
partition to leave out the throttled ones not caught up while the quota is exceeded, as Kafka's
``shouldFollowerThrottle`` does.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema

from odradek.broker.faults import FaultState
from odradek.broker.fetch_session_client import FetchSessionHandler, PartitionFetch
from odradek.broker.peer import PeerConnection
from odradek.broker.replica import Partition
from odradek.broker.replication_quota import ReplicationQuota
from odradek.clock import Clock
from odradek.errors import ErrorCode, KafkaError
from odradek.placement.model import TopicPartition
from odradek.protocol.records import CorruptBatchError, whole_batches
from odradek.security.broker_client import PLAINTEXT, OutgoingSecurity
from odradek.tasks import spawn

log = logging.getLogger(__name__)

FETCH_VERSION = 11  # names, not topic ids; no diverging-epoch field: truncation goes through OffsetForLeaderEpoch
EPOCH_VERSION = 3
BACKOFF_S = 0.2


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """The broker's follower settings (Kafka's names): ``replica.fetch.max.bytes``, ``replica.fetch.wait.max.ms``."""

    max_bytes: int
    wait_max_ms: int
    security: OutgoingSecurity = PLAINTEXT
    """How to reach leaders: the inter-broker listener's security (SASL, later TLS)."""


@dataclass(frozen=True, slots=True)
class FetcherDeps:
    """What a fetcher needs from its broker: who it is, its settings, the replicas it appends to (read-only), where
    leaders listen, the fault state that pauses or cuts it off, and the follower's replication throttle."""

    broker_id: int
    settings: FetchSettings
    replicas: Mapping[TopicPartition, Partition]
    endpoint: Callable[[int], tuple[str, int] | None]
    faults: FaultState
    quota: ReplicationQuota
    clock: Clock


@dataclass(slots=True)
class FetchState:
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    lag: int | None = None
    """How far the last answer left this replica behind the leader's high watermark (None: no answer yet)."""

    @property
    def in_sync(self) -> bool:
        """Kafka's ``PartitionFetchState.isReplicaInSync``: caught up with the high watermark at the last answer."""
        return self.lag is not None and self.lag <= 0


class ReplicaFetcher:
    def __init__(self, deps: FetcherDeps, leader_id: int, host: str, port: int) -> None:
        self.deps = deps
        self.leader_id = leader_id
        self.peer = PeerConnection(host, port, f"replica-fetcher-{deps.broker_id}-{leader_id}",
                                   deps.settings.security)
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._wanted: dict[TopicPartition, PartitionFetch] = {}
        """What the next fetch asks of each partition it fetches now (kept up to date through ``_changed``)."""
        self._changed: set[TopicPartition] = set()
        """Partitions whose entry in ``_wanted`` must be recomputed before the next fetch."""
        self._truncating: set[TopicPartition] = set()
        self._delayed: dict[TopicPartition, float] = {}
        """Partitions in a backoff, until when (loop time)."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._fetch_schema: Any = load_request_schema(1, FETCH_VERSION)
        self._fetch_mod = sys.modules[self._fetch_schema.__module__]
        self.session = FetchSessionHandler()
        self._epoch_schema: Any = load_request_schema(23, EPOCH_VERSION)
        self._epoch_mod = sys.modules[self._epoch_schema.__module__]

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"fetcher-{self.deps.broker_id}-from-{self.leader_id}")

    async def stop(self) -> None:
        # Python 3.11's wait_for can swallow a cancellation that races a completing read, so the loop also
        # checks a flag, and we cancel until the task is really done.
        self._stopping = True
        self.peer.close()
        self._wake.set()
        while self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task], timeout=1.0)

    def add(self, topic: str, partition: int, leader_epoch: int) -> None:
        self.adopt(TopicPartition(topic, partition), FetchState(leader_epoch))

    def adopt(self, tp: TopicPartition, state: FetchState) -> None:
        """Fetch ``tp`` in ``state`` (a new partition, or one taken over from the fetcher this one replaces)."""
        self.partitions[tp] = state
        self._changed.add(tp)
        if state.truncating:
            self._truncating.add(tp)
        if state.delayed_until:
            self._delayed[tp] = state.delayed_until
        self._wake.set()

    def remove(self, topic: str, partition: int) -> None:
        tp = TopicPartition(topic, partition)
        if self.partitions.pop(tp, None) is not None:
            self._changed.add(tp)
            self._truncating.discard(tp)
            self._delayed.pop(tp, None)

    def _truncate_later(self, tp: TopicPartition, st: FetchState) -> None:
        st.truncating = True
        self._truncating.add(tp)
        self._changed.add(tp)

    def _delay(self, tp: TopicPartition, st: FetchState) -> None:
        st.delayed_until = self._delayed[tp] = asyncio.get_running_loop().time() + BACKOFF_S
        self._changed.add(tp)

    async def _run(self) -> None:
        while not self._stopping:
            if not self.partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            if self.deps.faults.isolated:
                self.peer.close()
                await asyncio.sleep(BACKOFF_S)
                continue
            await self.deps.faults.resumed.wait()
            try:
                await self._truncate_pending()
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError) as exc:
                log.debug("fetcher %d<-%d: %s; backing off", self.deps.broker_id, self.leader_id, exc)
                self.peer.close()
                await asyncio.sleep(BACKOFF_S)
            except Exception:
                log.exception("fetcher %d<-%d failed; backing off", self.deps.broker_id, self.leader_id)
                self.peer.close()
                await asyncio.sleep(BACKOFF_S)

    async def _truncate_pending(self) -> None:
        if not self._truncating:
            return
        pending = [(tp, st) for tp in self._truncating if (st := self.partitions.get(tp)) is not None and st.truncating]
        if not pending:
            self._truncating.clear()
            return
        mod = self._epoch_mod
        by_topic: dict[str, list[Any]] = {}
        asked: dict[TopicPartition, int] = {}
        for tp, st in pending:
            topic, index = tp
            part = self.deps.replicas.get(tp)
            if part is None:
                continue
            own_epoch = part.log.latest_epoch
            asked[tp] = own_epoch
            by_topic.setdefault(topic, []).append(
                mod.OffsetForLeaderPartition(
                    partition=index, current_leader_epoch=st.leader_epoch, leader_epoch=max(own_epoch, 0)
                )
            )
        if not by_topic:
            return
        request = self._epoch_schema(
            replica_id=self.deps.broker_id,
            topics=tuple(mod.OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        )
        response = await self.peer.request(23, EPOCH_VERSION, request, timeout=10)
        for t in response.topics:
            for p in t.partitions:
                key = TopicPartition(t.topic, p.partition)
                state = self.partitions.get(key)
                part = self.deps.replicas.get(key)
                if state is None or part is None:
                    continue
                st = state
                if p.error_code != ErrorCode.none:
                    self._delay(key, st)
                    continue
                plog = part.log
                if asked[key] < 0 or p.leader_epoch < 0:
                    target = min(plog.high_watermark, plog.log_end_offset) if asked[key] >= 0 else plog.log_end_offset
                else:
                    target = p.end_offset
                    if p.leader_epoch < asked[key]:
                        # KIP-279: the leader never saw our epoch; cut where our copy of its epoch ended too
                        _e, own_end = plog.end_offset_for_epoch(p.leader_epoch)
                        target = min(target, own_end)
                target = min(target, plog.log_end_offset)
                if target < plog.log_end_offset:
                    log.info(
                        "truncating %s-%d from %d to %d (leader %d epoch %d ended there)",
                        t.topic, p.partition, plog.log_end_offset, target, self.leader_id, p.leader_epoch,
                    )
                    plog.truncate_to(target)
                st.truncating = False
                self._truncating.discard(key)
                self._changed.add(key)

    async def _fetch_once(self) -> None:
        mod = self._fetch_mod
        now = asyncio.get_running_loop().time()
        max_bytes = self.deps.settings.max_bytes
        wanted = self._wanted
        changed = self._changed
        if self._delayed:
            for tp, until in list(self._delayed.items()):
                if until <= now:
                    del self._delayed[tp]
                    changed.add(tp)
        replicas = self.deps.replicas
        held_back = self._held_back(self.deps.quota)  # adds every throttled partition not caught up to ``changed``
        for tp in changed:
            st = self.partitions.get(tp)
            part = replicas.get(tp)
            if st is None or st.truncating or st.delayed_until > now or part is None or tp in held_back:
                wanted.pop(tp, None)
                continue
            plog = part.log
            wanted[tp] = PartitionFetch(plog.log_end_offset, plog.log_start_offset, max_bytes, st.leader_epoch)
        if not wanted:
            await asyncio.sleep(BACKOFF_S)
            return
        self._changed = set()
        data = self.session.build(wanted, changed)
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), f in data.to_send.items():
            by_topic.setdefault(topic, []).append(
                mod.FetchPartition(
                    partition=index, current_leader_epoch=f.leader_epoch, fetch_offset=f.fetch_offset,
                    log_start_offset=f.log_start_offset, partition_max_bytes=f.max_bytes,
                )
            )
        forgotten: dict[str, list[int]] = {}
        for topic, index in data.forgotten:
            forgotten.setdefault(topic, []).append(index)
        wait_ms = self.deps.settings.wait_max_ms
        request = self._fetch_schema(
            replica_id=self.deps.broker_id, max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1,
            max_bytes=10 * max_bytes, isolation_level=0, session_id=data.session_id, session_epoch=data.epoch,
            topics=tuple(mod.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
            forgotten_topics_data=tuple(mod.ForgottenTopic(topic=t, partitions=tuple(ps))
                                        for t, ps in forgotten.items()),
            rack_id="",
        )
        try:
            response = await self.peer.request(1, FETCH_VERSION, request, timeout=wait_ms / 1000 + 10)
        except BaseException:
            self.session.handle_error()
            raise
        if not self.session.handle_response(data, response.error_code, response.session_id):
            log.info("fetcher %d<-%d: fetch session %d: %s; fetching in full", self.deps.broker_id, self.leader_id,
                     data.session_id, ErrorCode(response.error_code).name)
            return
        for t in response.responses:
            for p in t.partitions:
                self._apply(t.topic, p)

    def _held_back(self, quota: ReplicationQuota) -> set[TopicPartition]:
        """Kafka's ``shouldFollowerThrottle``: partitions not caught up, throttled here, while the quota is exceeded
        (left out of this fetch; each one counted in ``quota.withheld``). Every throttled partition not caught up
        is looked at again on each fetch, so one held back comes back once the rate has fallen."""
        if quota.bound is None:
            return set()
        lagging = {tp for tp, st in self.partitions.items()
                   if not st.in_sync and quota.is_throttled(tp.topic, tp.partition)}
        self._changed.update(lagging)
        if not lagging or not quota.exceeded(self.deps.clock.now_ms()):
            return set()
        quota.withheld += len(lagging)
        return lagging

    def _apply(self, topic: str, p: Any) -> None:
        key = TopicPartition(topic, p.partition_index)
        st = self.partitions.get(key)
        part = self.deps.replicas.get(key)
        if st is None or part is None or part.is_leader:
            return
        self._changed.add(key)  # its fetch offset, log start or state may move here: the next fetch looks again
        plog = part.log
        if p.error_code == ErrorCode.offset_out_of_range:
            if plog.log_end_offset < p.log_start_offset:
                log.info("%s-%d is behind the leader's log start %d: starting over there", topic,
                         p.partition_index, p.log_start_offset)
                plog.truncate_fully_and_start_at(p.log_start_offset)
            else:
                self._truncate_later(key, st)
            return
        if p.error_code != ErrorCode.none:
            if p.error_code in (ErrorCode.fenced_leader_epoch, ErrorCode.not_leader_or_follower,
                                ErrorCode.unknown_leader_epoch, ErrorCode.unknown_topic_or_partition):
                self._delay(key, st)
            return
        records = p.records
        if records:
            if self.deps.quota.is_throttled(topic, p.partition_index):
                self.deps.quota.record(len(records), self.deps.clock.now_ms())
            try:
                whole, batches = whole_batches(records)
            except CorruptBatchError as exc:
                log.warning("corrupt batch from leader %d for %s-%d: %s", self.leader_id, topic,
                            p.partition_index, exc)
                return
            if whole < len(records):  # a Kafka leader may cut the last batch short at the byte limit
                records = memoryview(records)[:whole]
            headers = [h for _pos, h in batches]
            if headers and headers[0].base_offset != plog.log_end_offset:
                # the leader answered from the batch holding our offset; skip what we already have (a view, not a
                # copy: the log writes the bytes as they are)
                batches = [(pos, h) for pos, h in batches if h.base_offset >= plog.log_end_offset]
                if not batches:
                    return
                records = memoryview(records)[batches[0][0]:]
                headers = [h for _pos, h in batches]
            try:
                plog.append_as_follower(records, headers)
            except KafkaError as exc:
                log.warning("follower append to %s-%d failed: %s", topic, p.partition_index, exc)
                self._truncate_later(key, st)
                return
        if p.log_start_offset > plog.log_start_offset:
            plog.delete_records_before(min(p.log_start_offset, plog.log_end_offset))
        plog.high_watermark = min(p.high_watermark, plog.log_end_offset)
        st.lag = max(0, p.high_watermark - plog.log_end_offset)


class FetcherManager:
    """Keeps one fetcher per leader broker and moves partitions between them as leadership changes."""

    def __init__(self, deps: FetcherDeps) -> None:
        self.deps = deps
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._where: dict[TopicPartition, int] = {}
        self._pending: dict[TopicPartition, tuple[int, int]] = {}

    def follow(self, topic: str, partition: int, leader_id: int, leader_epoch: int) -> None:
        self.unfollow(topic, partition)
        endpoint = self.deps.endpoint(leader_id)
        if endpoint is None:
            # The leader's address arrives with the next UpdateMetadata; resolve_pending() picks it up then.
            log.info("no endpoint known yet for leader %d of %s-%d", leader_id, topic, partition)
            self._pending[TopicPartition(topic, partition)] = (leader_id, leader_epoch)
            return
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None or (fetcher.peer.host, fetcher.peer.port) != endpoint:
            fetcher = ReplicaFetcher(self.deps, leader_id, endpoint[0], endpoint[1])
            old = self.fetchers.get(leader_id)
            if old is not None:
                for tp, st in old.partitions.items():
                    fetcher.adopt(tp, st)
                spawn(old.stop(), f"stop-fetcher-{leader_id}")
            self.fetchers[leader_id] = fetcher
            fetcher.start()
        fetcher.add(topic, partition, leader_epoch)
        self._where[TopicPartition(topic, partition)] = leader_id

    def resolve_pending(self) -> None:
        for (topic, partition), (leader_id, epoch) in list(self._pending.items()):
            if self.deps.endpoint(leader_id) is not None:
                self.follow(topic, partition, leader_id, epoch)

    def unfollow(self, topic: str, partition: int) -> None:
        self._pending.pop(TopicPartition(topic, partition), None)
        leader_id = self._where.pop(TopicPartition(topic, partition), None)
        if leader_id is not None and leader_id in self.fetchers:
            self.fetchers[leader_id].remove(topic, partition)

    def drop_connections(self) -> None:
        """A network partition: every fetch connection goes (the fetchers reconnect once healed)."""
        for fetcher in self.fetchers.values():
            fetcher.peer.close()

    async def stop(self) -> None:
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
        self._where.clear()
        self._pending.clear()
