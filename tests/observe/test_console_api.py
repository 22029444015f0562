"""The console's JSON from a broker that is not the controller: an offline partition, the controller's
OfflinePartitionsCount, and a reassignment stuck in progress (its new replica's broker was paused, as SIGSTOP would,
right after it was accepted, and its session then expired)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic
from scrape import get_json, metrics_urls, total, wait_for

from kafka_clients import opened
from odradek.cli.cluster import alter_reassignments, controller_connection
from odradek.errors import ErrorCode
from odradek.testing import ThreadedCluster


def test_offline_partitions_and_a_stuck_reassignment_seen_from_a_non_controller(
    observed_cluster: ThreadedCluster,
) -> None:
    cluster = observed_cluster
    controller = cluster.wait_for_controller()
    serving, victim = [b for b in cluster.broker_ids if b != controller][:2]
    admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
    futures = admin.create_topics([NewTopic("solo", num_partitions=1, replica_assignment=[[victim]]),
                                   NewTopic("moving", num_partitions=1, replica_assignment=[[serving]])])
    for future in futures.values():
        future.result(30)
    urls = metrics_urls(cluster)
    console = urls[serving].replace("/metrics", "/api/cluster")
    cluster.pause(victim)
    try:
        _check(cluster, urls, console, serving, victim, controller)
    finally:
        cluster.resume(victim)


def _check(cluster: ThreadedCluster, urls: dict[int, str], console: str, serving: int, victim: int,
           controller: int) -> None:
    with controller_connection(cluster.bootstrap) as conn:  # accepted: the victim is registered until it expires
        outcome = alter_reassignments(conn, {("moving", 0): [serving, victim]})
    assert outcome[("moving", 0)][0] == ErrorCode.none

    def solo() -> dict[str, object]:
        topics = {t["name"]: t for t in get_json(console)["topics"]}
        return topics["solo"]["partitions"][0] if "solo" in topics else {}

    wait_for(solo, lambda p: p.get("offline") is True, 30, "solo-0 shown offline")
    live = [u for b, u in urls.items() if b != victim]
    wait_for(lambda: total(live, "kafka_controller_kafkacontroller_offlinepartitionscount"), lambda n: n == 1, 30,
             "OfflinePartitionsCount")
    view = wait_for(lambda: get_json(console), lambda v: v["reassignments"] and not v["errors"], 30,
                    "the reassignment shown, every live broker answering")
    assert view["reassignments"] == [{"topic": "moving", "partition": 0, "replicas": [serving, victim],
                                      "adding": [victim], "removing": []}]
    assert view["served_by"] == serving and view["controller"]["id"] == controller
    assert view["controller"]["epoch"] >= 1
    down = [b for b in view["brokers"] if not b["alive"]]
    assert [b["id"] for b in down] == [victim]
