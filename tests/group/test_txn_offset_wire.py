"""TxnOffsetCommit and OffsetFetch(require_stable) on the wire, every version clients use, against a live broker.

A confluent-kafka transactional producer opens the transaction and adds the group's ``__consumer_offsets``
partition (send_offsets_to_transaction); raw requests then commit through each TxnOffsetCommit version with that
producer's id and epoch, and read back with OffsetFetch v7 with and without require_stable.
"""

from __future__ import annotations

import importlib
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.cli.transactions import connect, describe_transactions
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

TXN_OFFSET_COMMIT, OFFSET_FETCH = 28, 9
GROUP, TOPIC, TXN_ID = "wire-group", "wire", "wire-txn"


def _module(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def txn_offset_commit(conn: KafkaConnection, version: int, producer: tuple[int, int], offset: int,
                      **member: Any) -> ErrorCode:
    mod = _module("txn_offset_commit", version, "request")
    partition = mod.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                    committed_metadata=f"v{version}")
    request = mod.TxnOffsetCommitRequest(
        transactional_id=TXN_ID, group_id=GROUP, producer_id=producer[0], producer_epoch=producer[1],
        topics=(mod.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(partition,)),), **member,
    )
    response = conn.request(TXN_OFFSET_COMMIT, request, version)
    return ErrorCode(response.topics[0].partitions[0].error_code)


def offset_fetch(conn: KafkaConnection, require_stable: bool) -> tuple[int, ErrorCode]:
    mod = _module("offset_fetch", 7, "request")
    request = mod.OffsetFetchRequest(
        group_id=GROUP, topics=(mod.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(0,)),),
        require_stable=require_stable,
    )
    answer = conn.request(OFFSET_FETCH, request, 7).topics[0].partitions[0]
    return int(answer.committed_offset), ErrorCode(answer.error_code)


def test_every_txn_offset_commit_version_and_require_stable(broker: BrokerProcess) -> None:
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": TXN_ID}))
    producer.init_transactions(30)
    consumer = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": GROUP}))
    producer.begin_transaction()
    producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 5)], consumer.consumer_group_metadata(), 30)
    with connect(broker.bootstrap) as cluster:
        (state,) = describe_transactions(cluster, [TXN_ID])
    ids = (state.producer_id, state.producer_epoch)

    with KafkaConnection(broker.bootstrap) as conn:
        assert offset_fetch(conn, require_stable=False) == (-1, ErrorCode.none)
        assert offset_fetch(conn, require_stable=True) == (-1, ErrorCode.unstable_offset_commit)
        for version, offset in ((0, 10), (1, 11), (2, 12), (3, 13), (4, 14)):
            assert txn_offset_commit(conn, version, ids, offset) is ErrorCode.none, version
        # KIP-447: a member the group does not know, or a stale epoch, is refused and changes nothing.
        assert txn_offset_commit(conn, 3, ids, 99, member_id="ghost", generation_id=4) is ErrorCode.unknown_member_id
        stale = txn_offset_commit(conn, 4, (ids[0], ids[1] - 1), 99)
        assert stale is ErrorCode.invalid_producer_epoch
        producer.commit_transaction(30)
        # EndTxn answers once PrepareCommit is logged; the markers (and the offsets they make stable) follow, so a
        # reader asking at once may still get UNSTABLE_OFFSET_COMMIT and must retry, as Kafka's clients do.
        wait_for(lambda: offset_fetch(conn, require_stable=True) == (14, ErrorCode.none),
                 what="the committed offset to become stable")
    consumer.close()
