"""Topic deletion with a broker down (issue 5): the topic is ineligible for deletion while a replica is offline and
stays in the store, and is deleted (with its data on every broker) once the broker returns.

As in Kafka, the topic leaves Metadata as soon as deletion starts (the controller announces its partitions with the
"leader during delete" marker), so DeleteTopics may already have answered; what waits for the broker is the store."""

from __future__ import annotations

import threading
from pathlib import Path

from harness import ThreadedCluster
from workload import create_topic_with_assignment, partition_view

from brokers import wait_for
from odradek.admin import delete_topic, list_topics
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

TOPIC = "doomed"
ASSIGNMENT = {0: [0, 1, 2], 1: [1, 2, 0]}


def _dirs(c: ThreadedCluster) -> list[Path]:
    return [p for b in range(3) for p in (c.cluster.data_dir / f"broker-{b}").glob(f"{TOPIC}-*")]


def _ineligible(c: ThreadedCluster) -> bool:
    def check() -> bool:
        ctl = c.cluster.controller_id()
        return ctl is not None and TOPIC in c.broker(ctl).controller.ctx.topics_ineligible_for_deletion

    return bool(c.run(check))


def test_deletion_waits_for_a_dead_replica_then_removes_data_everywhere(cluster_factory) -> None:
    c = cluster_factory(3)
    create_topic_with_assignment(c.bootstrap, TOPIC, ASSIGNMENT)
    wait_for(lambda: len(_dirs(c)) == 6, 30, what="six replica directories")
    victim = 2 if c.controller_id() != 2 else 1
    c.kill(victim)
    wait_for(lambda: all(victim not in v[2] for v in partition_view(c.bootstrap, TOPIC).values()), 30,
             what=f"broker {victim} out of every ISR")

    answers: list[tuple[ErrorCode, str | None]] = []

    def request_deletion() -> None:
        with KafkaConnection(c.bootstrap, timeout=90) as conn:
            answers.append(delete_topic(conn, TOPIC))

    requester = threading.Thread(target=request_deletion)
    requester.start()
    wait_for(lambda: _ineligible(c), 30, what="the topic marked ineligible for deletion")
    c.controller_idle()
    assert c.znode(f"/brokers/topics/{TOPIC}") is not None, "the topic left the store with a replica offline"
    assert c.znode(f"/admin/delete_topics/{TOPIC}") is not None
    assert any(p.parent.name == f"broker-{victim}" for p in _dirs(c)), "the dead broker's replicas vanished"
    c.start_broker(victim)
    wait_for(lambda: c.znode(f"/brokers/topics/{TOPIC}") is None, 30, what="the topic gone from the store")
    wait_for(lambda: not _dirs(c), 30, what="every replica directory deleted")
    assert c.znode(f"/admin/delete_topics/{TOPIC}") is None
    with KafkaConnection(c.bootstrap) as conn:
        wait_for(lambda: TOPIC not in list_topics(conn), 30, what="the topic gone from Metadata")
    requester.join(60)
    assert answers and answers[0][0] in (ErrorCode.none, ErrorCode.request_timed_out), answers
