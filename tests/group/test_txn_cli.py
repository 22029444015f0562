"""``odradek transactions`` against a live broker: list, describe, describe producers, and aborting an open
transaction by its start offset (kafka-transactions.sh abort), after which read_committed readers move past it."""

from __future__ import annotations

from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.cli.transactions import transactions


def _cli(broker: BrokerProcess, *args: str) -> str:
    result = CliRunner().invoke(transactions, ["--bootstrap-server", broker.bootstrap, *args])
    assert result.exit_code == 0, result.output
    return result.output


def _create(broker: BrokerProcess, topic: str) -> None:
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def _read(broker: BrokerProcess, topic: str, isolation: str) -> list[bytes]:
    consumer = opened(Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{isolation}",
                                "isolation.level": isolation, "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    for _ in range(4):
        values += [m.value() for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    consumer.close()
    return values


def test_list_describe_and_abort_a_hanging_transaction(broker: BrokerProcess) -> None:
    _create(broker, "t")
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "cli-txn", "linger.ms": 0}))
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("t", b"open-%d" % i, partition=0)
    assert producer.flush(30) == 0

    listed = _cli(broker, "--list")
    assert "cli-txn" in listed and "Ongoing" in listed
    described = _cli(broker, "--describe", "--transactional-id", "cli-txn")
    assert "Ongoing" in described and "t-0" in described
    producers = _cli(broker, "--describe-producers", "--topic", "t", "--partition", "0")
    assert "CurrentTransactionStartOffset" in producers
    assert _read(broker, "t", "read_committed") == []  # the open transaction holds the LSO at 0

    aborted = _cli(broker, "--abort", "--topic", "t", "--partition", "0", "--start-offset", "0")
    assert "Aborted the transaction of producer" in aborted
    wait_for(lambda: "None" in _cli(broker, "--describe-producers", "--topic", "t", "--partition", "0"), 10,
             what="the producer's open transaction to end")
    # The abort marker ended the range: read_uncommitted still sees the records, read_committed never will.
    assert _read(broker, "t", "read_uncommitted") == [b"open-0", b"open-1", b"open-2"]
    assert _read(broker, "t", "read_committed") == []


def test_abort_without_an_open_transaction_at_that_offset_fails(broker: BrokerProcess) -> None:
    _create(broker, "u")
    result = CliRunner().invoke(
        transactions, ["--bootstrap-server", broker.bootstrap, "--abort", "--topic", "u", "--partition", "0",
                       "--start-offset", "7"],
    )
    assert result.exit_code != 0 and "Could not find any open transactions starting at offset 7" in result.output
    usage = CliRunner().invoke(transactions, ["--bootstrap-server", broker.bootstrap, "--describe"])
    assert usage.exit_code != 0 and "--transactional-id" in usage.output


def test_describe_an_id_without_a_transaction(broker: BrokerProcess) -> None:
    """An Empty id's start time is -1 on the wire, as Kafka sends it; the tool prints it rather than failing."""
    producer = opened(Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "idle-txn"}))
    producer.init_transactions(30)
    described = _cli(broker, "--describe", "--transactional-id", "idle-txn")
    assert "Empty" in described and "idle-txn" in described
    missing = CliRunner().invoke(transactions, ["--bootstrap-server", broker.bootstrap, "--describe",
                                                "--transactional-id", "never-used"])
    assert missing.exit_code != 0 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.output
