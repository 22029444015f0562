"""Controlled shutdown under acks=all load (issue 5): the broker's leaderships move before it stops, and the
producer sees only retriable errors and loses nothing."""

from __future__ import annotations

import json
from typing import Any

from harness import ThreadedCluster
from workload import Load, check_nothing_lost, create_topic_with_assignment, partition_view, read_back

from brokers import wait_for

TOPIC = "cs"
ASSIGNMENT = {0: [0, 1, 2], 1: [0, 2, 1], 2: [1, 2, 0]}


def _record_leaders_when_handover_ends(c: ThreadedCluster, broker_id: int) -> dict[str, Any]:
    """Wrap the broker's controlled shutdown: the moment it returns (the broker has not closed anything yet),
    note who leads each partition in the store. (As in Kafka, the shutting-down broker itself is not told: it stops
    right after, and its followers already fetch from the new leaders, so it cannot acknowledge acks=all writes.)"""
    seen: dict[str, Any] = {}

    def install() -> None:
        broker = c.broker(broker_id)
        original = broker.controlled_shutdown

        async def wrapped() -> None:
            await original()
            session = broker.membership.current()
            states = [json.loads((await session.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state"))[0])
                      for p in ASSIGNMENT]
            seen["store_leaders"] = [s["leader"] for s in states]
            seen["serving"] = broker.running

        broker.controlled_shutdown = wrapped

    c.run(install)
    return seen


def test_controlled_shutdown_moves_leaders_first_and_producers_see_only_retriable_errors(cluster_factory) -> None:
    c = cluster_factory(3)
    create_topic_with_assignment(c.bootstrap, TOPIC, ASSIGNMENT, {"min.insync.replicas": "2"})
    wait_for(lambda: [c.leader_of(TOPIC, p) for p in ASSIGNMENT] == [0, 0, 1], 30, what="preferred leaders")
    load = Load(c.bootstrap, TOPIC, len(ASSIGNMENT))
    try:
        load.progress(500)
        seen = _record_leaders_when_handover_ends(c, 0)
        c.stop_broker(0, controlled=True)
        assert seen["serving"], "the handover ran after the broker had stopped serving"
        assert 0 not in seen["store_leaders"], f"broker 0 still led {seen['store_leaders']} when it stopped"
        load.progress(500)
        c.start_broker(0)
        wait_for(lambda: all(sorted(v[2]) == [0, 1, 2] for v in partition_view(c.bootstrap, TOPIC).values()), 60,
                 what="broker 0 back in every ISR")
        load.progress(300)
    finally:
        load.finish()
    assert not load.fatal_errors(), [str(e) for e in load.fatal_errors()]
    check_nothing_lost(load, read_back(c.bootstrap, TOPIC, len(ASSIGNMENT)))
