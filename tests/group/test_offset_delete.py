"""OffsetDelete (issue 12) through kafka-python's KafkaAdminClient.delete_group_offsets (confluent-kafka's
Python AdminClient has no call for it): offsets of topics a
live member subscribes to are refused with GROUP_SUBSCRIBED_TO_TOPIC, others go; once the group is Empty any go."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.errors import GroupSubscribedToTopicError, NoError
from kafka.structs import TopicPartition as KpTopicPartition

from brokers import BrokerProcess, wait_for
from kafka_clients import opened

GROUP = "pruning"


def _committed(admin: AdminClient, *tps: TopicPartition) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    bare = [TopicPartition(tp.topic, tp.partition) for tp in tps]
    [fut] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP, bare)]).values()
    return {(tp.topic, tp.partition): tp.offset for tp in fut.result(30).topic_partitions}


def _delete(broker: BrokerProcess, topic: str) -> type:
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = kp.delete_group_offsets(GROUP, [KpTopicPartition(topic, 0)])
    finally:
        kp.close()
    return result[KpTopicPartition(topic, 0)]


def test_offset_delete_spares_subscribed_topics_until_the_group_is_empty(broker: BrokerProcess) -> None:
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    for fut in admin.create_topics([NewTopic("subscribed", 1, 1), NewTopic("other", 1, 1)]).values():
        fut.result(30)
    consumer = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP, "enable.auto.commit": False}))
    consumer.subscribe(["subscribed"])
    wait_for(lambda: consumer.poll(0.5) is None and bool(consumer.assignment()), 30, what="an assignment")
    sub, other = TopicPartition("subscribed", 0, 3), TopicPartition("other", 0, 7)
    consumer.commit(offsets=[sub, other], asynchronous=False)
    assert _committed(admin, sub, other) == {("subscribed", 0): 3, ("other", 0): 7}

    assert _delete(broker, "subscribed") is GroupSubscribedToTopicError
    assert _delete(broker, "other") is NoError
    assert _committed(admin, sub, other) == {("subscribed", 0): 3, ("other", 0): -1001}

    consumer.close()
    assert _delete(broker, "subscribed") is NoError
    assert _committed(admin, sub) == {("subscribed", 0): -1001}
