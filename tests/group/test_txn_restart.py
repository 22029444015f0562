"""Transactional offsets survive a broker restart in either state: committed ones are reloaded as visible, ones of
a transaction still open are reloaded as pending and become visible when that transaction commits afterwards.

Exercises the ``__consumer_offsets`` loader on real data: transactional batches and the control batches that end
them, written by the broker's own transaction coordinator.
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess, wait_for
from kafka_clients import opened

TOPIC = "src"


def committed(bootstrap: str, group: str, isolation: str = "read_committed") -> int:
    """The group's committed offset; librdkafka asks with require_stable under read_committed."""
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": isolation}))
    try:
        (tp,) = consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)
        return int(tp.offset)
    finally:
        consumer.close()


def send_offsets(producer: Producer, bootstrap: str, group: str, offset: int) -> None:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": group}))
    producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, offset)], consumer.consumer_group_metadata(), 30)
    consumer.close()


def test_committed_and_open_transactional_offsets_survive_a_restart(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory("--override", "group.initial.rebalance.delay.ms=0",
                            "--override", "log.flush.interval.messages=1")
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "restart-txn"}))
    producer.init_transactions(30)
    for group, offset, commit in (("done", 7, True), ("dropped", 8, False)):
        producer.begin_transaction()
        send_offsets(producer, broker.bootstrap, group, offset)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    producer.begin_transaction()
    send_offsets(producer, broker.bootstrap, "open", 9)

    broker.kill()
    broker.restart()
    assert committed(broker.bootstrap, "done") == 7
    assert committed(broker.bootstrap, "dropped") < 0
    assert committed(broker.bootstrap, "open", "read_uncommitted") < 0  # reloaded as pending: not visible
    # The open transaction survives in the transaction log; committing it now publishes the reloaded offsets.
    wait_for(lambda: _commit(producer), 60, interval=0.5, what="the open transaction to commit after the restart")
    assert committed(broker.bootstrap, "open") == 9


def _commit(producer: Producer) -> bool:
    try:
        producer.commit_transaction(10)
    except Exception as exc:  # retriable while the restarted broker loads its coordinators
        if getattr(exc.args[0], "retriable", lambda: False)():
            return False
        raise
    return True
