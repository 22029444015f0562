"""/metrics on a three-broker cluster, read as Prometheus reads it, against what clients did and faults caused."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, NewTopic
from scrape import metrics_urls, scrape, total, value, wait_for

from kafka_clients import opened
from odradek.testing import ThreadedCluster

ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"
URP = "kafka_server_replicamanager_underreplicatedpartitions"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
LAG = "kafka_consumergroup_lag"


def _create(cluster: ThreadedCluster, topic: str, partitions: int = 3) -> None:
    admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(30)


def _produce(cluster: ThreadedCluster, topic: str, counts: dict[int, int]) -> None:
    producer = opened(Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5}))
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0


def test_exactly_one_active_controller_and_messages_in_counts_what_was_produced(
    observed_cluster: ThreadedCluster,
) -> None:
    urls = metrics_urls(observed_cluster)
    actives = {broker: value(scrape(url), ACTIVE) for broker, url in urls.items()}
    assert sorted(actives.values()) == [0.0, 0.0, 1.0], actives
    assert actives[observed_cluster.controller_id()] == 1.0  # type: ignore[index]

    _create(observed_cluster, "clicks")
    _produce(observed_cluster, "clicks", {0: 70, 1: 20, 2: 33})
    assert total(urls.values(), MESSAGES_IN, topic="clicks") == 123
    assert total(urls.values(), "kafka_server_brokertopicmetrics_bytesin_total", topic="clicks") > 123
    produce_requests = total(urls.values(), "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produce_requests >= 3
    assert total(urls.values(), "kafka_network_requestmetrics_totaltimems_count", request="Produce") == \
        produce_requests
    leaders = total(urls.values(), "kafka_server_replicamanager_leadercount")
    assert leaders >= 3  # the topic's three partitions, and __consumer_offsets' if it exists yet


def test_under_replicated_partitions_rise_when_a_broker_dies_and_return_when_it_is_back(
    observed_cluster: ThreadedCluster,
) -> None:
    _create(observed_cluster, "orders")
    _produce(observed_cluster, "orders", {0: 5, 1: 5, 2: 5})
    urls = metrics_urls(observed_cluster)
    assert total(urls.values(), URP) == 0
    victim = next(b for b in observed_cluster.broker_ids if b != observed_cluster.controller_id())
    observed_cluster.kill(victim)
    survivors = [u for b, u in urls.items() if b != victim]
    wait_for(lambda: total(survivors, URP), lambda n: n >= 2, 30, "UnderReplicatedPartitions after a kill")
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(urls[victim], timeout=5)  # a killed broker serves no metrics either
    offline = total(survivors, "kafka_controller_kafkacontroller_offlinepartitionscount")
    assert offline == 0  # RF 3: every partition kept a leader

    observed_cluster.start_broker(victim)
    urls = metrics_urls(observed_cluster)
    wait_for(lambda: total(urls.values(), URP), lambda n: n == 0, 60, "UnderReplicatedPartitions after restart")
    # the controller took the dead replica out of the ISRs (Kafka counts that as no leader's shrink); the leaders
    # took it back in once it caught up, and count those expansions
    assert total(urls.values(), "kafka_server_replicamanager_isrexpands_total") >= 1


def test_consumer_group_lag_matches_what_a_consumer_left_behind(observed_cluster: ThreadedCluster) -> None:
    _create(observed_cluster, "events")
    produced = {0: 40, 1: 25, 2: 10}
    _produce(observed_cluster, "events", produced)
    consumed = {0: 15, 1: 25, 2: 0}  # what the consumer reads (and commits) of each partition
    consumer = opened(Consumer({"bootstrap.servers": observed_cluster.bootstrap, "group.id": "billing",
                                "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    try:
        consumer.assign([KafkaTP("events", p, 0) for p in consumed if consumed[p]])
        seen = {p: 0 for p in consumed}
        while any(seen[p] < consumed[p] for p in consumed):
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None, msg and msg.error()
            if seen[msg.partition()] < consumed[msg.partition()]:
                seen[msg.partition()] += 1
        commits = [KafkaTP("events", p, n) for p, n in consumed.items()]
        consumer.commit(offsets=commits, asynchronous=False)
    finally:
        consumer.close()
    urls = metrics_urls(observed_cluster).values()
    expected = {p: produced[p] - consumed[p] for p in produced}

    def lags() -> dict[int, float]:
        return {p: total(urls, LAG, consumergroup="billing", topic="events", partition=str(p)) for p in produced}

    wait_for(lags, lambda got: got == expected, 30, "kafka_consumergroup_lag")
    current = {p: total(urls, "kafka_consumergroup_current_offset", consumergroup="billing", topic="events",
                        partition=str(p)) for p in produced}
    assert current == consumed
