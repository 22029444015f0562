"""DescribeTopicPartitions (issue 12): librdkafka's describe_topics (which uses it from 2.5 on) and the cursor
pagination Kafka's KIP-966 defines, over the wire."""

from __future__ import annotations

import sys

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode


def test_describe_topics_and_pagination(broker: BrokerProcess) -> None:
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    for fut in admin.create_topics([NewTopic("alpha", 3, 1), NewTopic("beta", 2, 1)]).values():
        fut.result(30)
    [fut] = admin.describe_topics(TopicCollection(["alpha"]), request_timeout=20).values()
    desc = fut.result(30)
    assert desc.name == "alpha" and [p.id for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader is not None and p.leader.id == 0 for p in desc.partitions)
    [missing] = admin.describe_topics(TopicCollection(["nowhere"]), request_timeout=20).values()
    with pytest.raises(KafkaException) as info:
        missing.result(30)
    assert info.value.args[0].code() == ErrorCode.unknown_topic_or_partition

    cls = load_request_schema(75, 0)
    mod = sys.modules[cls.__module__]

    def page(limit: int, cursor: tuple[str, int] | None) -> tuple[list[tuple[str, int]], tuple[str, int] | None]:
        request = cls(topics=(mod.TopicRequest(name="beta"), mod.TopicRequest(name="alpha")),
                      response_partition_limit=limit,
                      cursor=mod.Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None)
        with KafkaConnection(broker.bootstrap) as conn:
            answer = conn.request(75, request, 0)
        got = [(t.name, p.partition_index) for t in answer.topics for p in t.partitions]
        nxt = answer.next_cursor
        return got, (nxt.topic_name, nxt.partition_index) if nxt is not None else None

    assert page(2, None) == ([("alpha", 0), ("alpha", 1)], ("alpha", 2))
    assert page(2, ("alpha", 2)) == ([("alpha", 2), ("beta", 0)], ("beta", 1))
    assert page(2, ("beta", 1)) == ([("beta", 1)], None)
