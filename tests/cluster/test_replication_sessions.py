"""Followers replicate through incremental fetch sessions (KIP-227) across a leader change and a follower restart,
and every replica ends up with the leader's bytes (issues 11, 12)."""

from __future__ import annotations

from typing import Any

from workload import Load, check_nothing_lost, create_replicated_topic, read_back

from brokers import wait_for
from odradek.placement.model import TopicPartition

TOPIC = "sessions"
PARTITIONS = 4


def _sessions(c: Any) -> list[tuple[int, int, int, int, bool]]:
    """(follower, leader, session id, epoch, the leader holds that session as a follower's) per running fetcher."""

    def read() -> list[tuple[int, int, int, int, bool]]:
        brokers = c.cluster.brokers
        out = []
        for b in brokers.values():
            if not b.running:
                continue
            for leader_id, fetcher in b.replicas.fetchers.fetchers.items():
                if not fetcher.partitions or leader_id not in brokers or not brokers[leader_id].running:
                    continue
                sid = fetcher.session.session_id
                held = brokers[leader_id].fetch_sessions.get(sid)
                out.append((b.broker_id, leader_id, sid, fetcher.session.epoch, held is not None and held.privileged))
        return out

    return c.run(read)


def _incremental_everywhere(c: Any) -> bool:
    seen = _sessions(c)
    return bool(seen) and all(sid != 0 and epoch > 2 and held for _f, _l, sid, epoch, held in seen)


def _sessions_idle(c: Any) -> bool:
    """The session of every running fetcher has no dirty partition on its leader: once nothing is produced, a
    follower's fetch reads no partition at all (issue 11), and it gets there through the replicas' events alone.
    (Sessions of fetchers that died with their broker stay in the leader's cache until evicted, and are not read.)"""

    fetchers = _sessions(c)

    def read() -> bool:
        brokers = c.cluster.brokers
        in_use = [brokers[leader].fetch_sessions.get(sid) for _f, leader, sid, _e, _h in fetchers]
        return bool(in_use) and all(s is not None and not s.dirty for s in in_use)

    return c.run(read)


def _replicas_agree(c: Any) -> bool:
    """Every running replica of every partition holds exactly the same bytes as the others."""

    def read() -> bool:
        for p in range(PARTITIONS):
            copies = set()
            for b in c.cluster.brokers.values():
                part = b.replicas.partitions.get(TopicPartition(TOPIC, p)) if b.running else None
                if part is None:
                    return False
                log = part.log
                data = log.read(log.log_start_offset, 1 << 30, None).buffers
                copies.add(b"".join(bytes(x) for x in data))
            if len(copies) != 1:
                return False
        return True

    return c.run(read)


def test_followers_fetch_in_sessions_through_a_leader_change_and_a_restart(cluster_factory) -> None:
    c = cluster_factory(3)
    create_replicated_topic(c.bootstrap, TOPIC, PARTITIONS)
    load = Load(c.bootstrap, TOPIC, PARTITIONS)
    try:
        load.progress(300)
        wait_for(lambda: _incremental_everywhere(c), 30, what="every follower fetching incrementally")

        leader = c.leader_of(TOPIC, 0)
        c.kill(leader)
        wait_for(lambda: c.leader_of(TOPIC, 0) not in (leader, -1), 60, what="a new leader")
        load.progress(300)
        c.start_broker(leader)
        wait_for(lambda: c.full_isr(TOPIC, PARTITIONS), 60, what="the killed leader back in every ISR")
        load.progress(300)

        follower = next(b for b in c.broker_ids if b != c.leader_of(TOPIC, 0))
        c.restart(follower)
        wait_for(lambda: c.full_isr(TOPIC, PARTITIONS), 60, what="the restarted follower back in every ISR")
        load.progress(300)
        wait_for(lambda: _incremental_everywhere(c), 30, what="sessions again after the restarts")
    finally:
        load.finish()
    check_nothing_lost(load, read_back(c.bootstrap, TOPIC, PARTITIONS))
    wait_for(lambda: _replicas_agree(c), 60, what="every replica holding the leader's bytes")
    wait_for(lambda: _sessions_idle(c), 30, what="the followers' sessions idle: nothing left to read")
    assert c.full_isr(TOPIC, PARTITIONS)
