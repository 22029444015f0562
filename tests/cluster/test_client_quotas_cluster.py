"""Client quotas across brokers: a quota altered through one broker reaches every broker through the change
notification, and the other broker throttles a producer writing to the partition it leads."""

from __future__ import annotations

import json
from collections.abc import Callable

from confluent_kafka import Producer, ThrottleEvent
from harness import ThreadedCluster
from workload import create_topic_with_assignment

from brokers import wait_for
from kafka_clients import opened
from odradek import admin
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

QUOTA = 50_000


def test_a_quota_altered_through_one_broker_is_enforced_by_another(
    cluster_factory: Callable[..., ThreadedCluster],
) -> None:
    c = cluster_factory(2, overrides={"quota.window.num": "2"})
    first, second = c.broker_ids
    create_topic_with_assignment(c.bootstrap, "limited", {0: [second]})
    address = c.bootstrap.split(",")[c.broker_ids.index(first)]
    with KafkaConnection(address) as conn:  # the broker that does not lead the partition
        assert admin.alter_client_quotas(conn, [("user", "ANONYMOUS"), ("client-id", "limited-app")],
                                         {"producer_byte_rate": QUOTA}) == (ErrorCode.none, None)

    def quota_on(broker_id: int) -> float | None:
        return c.run(lambda: c.broker(broker_id).client_quotas.quotas.produce.quota("ANONYMOUS", "limited-app"))

    wait_for(lambda: quota_on(first) == QUOTA and quota_on(second) == QUOTA, 30, what="quota on both brokers")
    # the embedded store holds Kafka's znodes, as ZooKeeper would
    assert json.loads(c.znode("/config/users/ANONYMOUS/clients/limited-app") or b"") == {
        "version": 1, "config": {"producer_byte_rate": str(QUOTA)}}

    throttled_by: set[int] = set()

    def throttled(event: ThrottleEvent) -> None:
        if event.throttle_time > 0:
            throttled_by.add(event.broker_id)

    producer = opened(Producer({"bootstrap.servers": c.bootstrap, "client.id": "limited-app", "linger.ms": 5,
                                "batch.size": 16_384, "throttle_cb": throttled}))
    sent = 0
    # A fresh client may burst one window's quota; 3 windows' worth must be throttled by the partition's leader.
    while not throttled_by:
        assert sent < QUOTA * 20, "no throttle after 20 s worth of the quota"
        producer.produce("limited", b"x" * 1000, partition=0)
        sent += 1000
        if sent % (QUOTA // 2) == 0:
            producer.flush(30)
        producer.poll(0)
    producer.flush(30)
    assert throttled_by == {second}
