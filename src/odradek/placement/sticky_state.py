"""Shared state of one sticky assignment: partitions as int ids, members as indices, rack information.

Partition ``topic-p`` has the id ``base[topic] + p`` where topics are numbered in name order, so sorting ids
sorts by (topic, partition) -- the order Kafka's constrained builder walks -- without touching a
``TopicPartition``. ``TopicPartition`` objects are only made at the edges (output and
``partitions_transferring_ownership``).
"""

from __future__ import annotations

from collections.abc import Iterable

from .assignor_base import TopicMeta, use_rack_aware_assignment
from .java import java_key
from .model import Subscription, TopicPartition, partitions_of

__all__ = ["StickyState"]


class StickyState:
    """Topics, partitions and members of one call, with Kafka's ``RackInfo``."""

    def __init__(
        self,
        metas: list[TopicMeta],
        member_ids: list[str],
        subs: list[Subscription],
        prefer_rack_aware_logic: bool,
    ) -> None:
        self.metas = metas
        self.member_ids = member_ids
        self.subs = subs
        self.member_keys = [java_key(m) for m in member_ids]
        order = sorted(range(len(metas)), key=lambda i: metas[i].name)
        self.topic_names = [metas[i].name for i in order]  # by rank (name order)
        self.topic_counts = [metas[i].count for i in order]
        self.rank = {name: r for r, name in enumerate(self.topic_names)}
        self.base: list[int] = []
        total = 0
        for c in self.topic_counts:
            self.base.append(total)
            total += c
        self.total = total
        self._topic_of: list[int] | None = None
        self._tps: list[TopicPartition] | None = None
        self._pt_key: list[int] | None = None
        self._bytes_index: dict[bytes, tuple[int, int]] | None = None
        self._init_racks([metas[i] for i in order], prefer_rack_aware_logic)

    # -- partition ids --
    @property
    def topic_of(self) -> list[int]:
        """Topic rank of every partition id."""
        if self._topic_of is None:
            out: list[int] = []
            for r, c in enumerate(self.topic_counts):
                out.extend([r] * c)
            self._topic_of = out
        return self._topic_of

    @property
    def tps(self) -> list[TopicPartition]:
        """``TopicPartition`` of every partition id (built once, on demand)."""
        if self._tps is None:
            out: list[TopicPartition] = []
            for name, c in zip(self.topic_names, self.topic_counts, strict=True):
                out.extend(partitions_of(name, c))
            self._tps = out
        return self._tps

    def ids_of(self, partitions: Iterable[TopicPartition]) -> list[int]:
        """Ids of the partitions that exist (gone topics, partitions beyond the count are dropped)."""
        rank, base, counts = self.rank, self.base, self.topic_counts
        out: list[int] = []
        for topic, p in partitions:
            r = rank.get(topic)
            if r is not None and 0 <= p < counts[r]:
                out.append(base[r] + p)
        return out

    @property
    def partition_topic_key(self) -> list[int]:
        """Per partition id, its rank in Kafka's (partition, topic) order used since KAFKA-16277.

        ``partition * n_topics + topic rank``, built from ranges at C speed; sort with ``key=keys.__getitem__``.
        """
        if self._pt_key is None:
            n = len(self.topic_counts)
            out: list[int] = []
            for r, c in enumerate(self.topic_counts):
                out.extend(range(r, c * n + r, n))
            self._pt_key = out
        return self._pt_key

    @property
    def topic_bytes_index(self) -> dict[bytes, tuple[int, int]]:
        """UTF-8 topic name -> (base id, partition count), for decoding user data straight to ids."""
        if self._bytes_index is None:
            counts = self.topic_counts
            names = self.topic_names
            self._bytes_index = {name.encode("utf-8"): (self.base[r], counts[r]) for r, name in enumerate(names)}
        return self._bytes_index

    # -- racks (Kafka's RackInfo) --
    def _init_racks(self, metas_by_rank: list[TopicMeta], prefer: bool) -> None:
        consumers_by_rack: dict[str, int] = {}
        for sub in self.subs:
            if sub.rack:
                consumers_by_rack[sub.rack] = consumers_by_rack.get(sub.rack, 0) + 1
        self.consumer_rack: list[str | None] = [None] * len(self.subs)
        self.partition_racks: list[frozenset[str]] | None = None
        self.consumers_on_racks: list[int] | None = None
        self.rack_aware = False
        if not consumers_by_rack:
            return
        racks: list[frozenset[str]] = []
        empty: frozenset[str] = frozenset()
        for meta in metas_by_rank:
            racks.extend(meta.racks if meta.racks is not None else [empty] * meta.count)
        all_racks: set[str] = set()
        for r in set(racks):
            all_racks |= r
        cache: dict[frozenset[str], int] = {}
        counts: list[int] = []
        for r in racks:
            v = cache.get(r)
            if v is None:
                v = sum(consumers_by_rack.get(x, 0) for x in r)
                cache[r] = v
            counts.append(v)
        self.consumers_on_racks = counts
        if use_rack_aware_assignment(set(consumers_by_rack), all_racks, racks, prefer):
            self.rack_aware = True
            self.partition_racks = racks
            self.consumer_rack = [s.rack if s.rack else None for s in self.subs]

    def racks_mismatch(self, m: int, g: int) -> bool:
        """The member has a rack and the partition has no replica on it."""
        rack = self.consumer_rack[m]
        return rack is not None and self.partition_racks is not None and rack not in self.partition_racks[g]

    def sort_by_rack_consumers(self, partitions: list[int]) -> list[int]:
        """Stable sort by the number of consumers on the partition's racks (Kafka does it whenever any
        consumer has a rack, even if rack-aware assignment is off)."""
        counts = self.consumers_on_racks
        if counts is None:
            return partitions
        return sorted(partitions, key=counts.__getitem__)

    def next_rack_consumer(self, g: int, members: list[int], first: int) -> int:
        """First member index, circularly from ``first``, whose rack hosts a replica of ``g``."""
        assert self.partition_racks is not None
        racks = self.partition_racks[g]
        if not racks:
            return -1
        n = len(members)
        for i in range(n):
            idx = (first + i) % n
            rack = self.consumer_rack[members[idx]]
            if rack is not None and rack in racks:
                return idx
        return -1
