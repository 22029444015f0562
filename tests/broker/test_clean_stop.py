"""A clean stop of a real ``odradek up`` process: what it leaves on disk and what the next start finds.

A clean stop writes the producer state of the logs that have any in one file per log directory, no snapshot file
per log; new logs' first leader-epoch checkpoints are written in the background or by the stop; and the process
ends without the interpreter's teardown, after its last log line.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.broker.log.producer_state import SNAPSHOT_SUFFIX, read_stop_states
from odradek.cli.transactions import transactions

TOPIC = "stops"


def _produce(bootstrap: str, partition: int, values: list[bytes], idempotent: bool) -> None:
    producer = opened(Producer({"bootstrap.servers": bootstrap, "enable.idempotence": idempotent}))
    for value in values:
        producer.produce(TOPIC, value=value, partition=partition)
    assert producer.flush(30) == 0


def _values(bootstrap: str, partition: int) -> list[bytes]:
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": "stop-reader",
                                "enable.auto.commit": False}))
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10)
        consumer.assign([TopicPartition(TOPIC, partition, low)])
        out: list[bytes] = []
        while len(out) < high - low:
            for message in consumer.consume(100, timeout=1):
                assert message.error() is None, message.error()
                out.append(bytes(message.value() or b""))
        return out
    finally:
        consumer.close()


def _producers(bootstrap: str, partition: int) -> str:
    result = CliRunner().invoke(transactions, ["--bootstrap-server", bootstrap, "--describe-producers",
                                               "--topic", TOPIC, "--partition", str(partition)])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_clean_stop_keeps_producer_state_and_the_next_start_finds_it(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        _stop_and_restart(broker, tmp_path)
    finally:
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill()


def _stop_and_restart(broker: BrokerProcess, tmp_path: Path) -> None:
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    _produce(broker.bootstrap, 0, [b"plain-0", b"plain-1"], idempotent=False)
    _produce(broker.bootstrap, 1, [b"idem-0", b"idem-1", b"idem-2"], idempotent=True)
    before = _producers(broker.bootstrap, 1)
    assert "│ 0 " in before, before  # one row: the idempotent producer, id 0

    assert broker.stop() == 0
    logs = tmp_path / "data" / "broker-0"
    assert (logs / ".kafka_cleanshutdown").exists()
    text = broker.log_text()
    assert "closed 2 logs in" in text
    assert text.rstrip().endswith("broker 0 stopped"), "the last log line is written before the process ends"
    plain, idem = logs / f"{TOPIC}-0", logs / f"{TOPIC}-1"
    assert sorted(p.name for p in (*plain.glob(f"*{SNAPSHOT_SUFFIX}"), *idem.glob(f"*{SNAPSHOT_SUFFIX}"))) == []
    states = read_stop_states(logs)  # the one producer-state file of the directory: only the idempotent log
    assert states is not None and list(states) == [(TOPIC, 1)]
    for directory in (plain, idem):
        assert (directory / "leader-epoch-checkpoint").read_text().splitlines()[2:] == ["0 0"]

    broker.start()
    assert "(0 directories after an unclean shutdown)" in broker.log_text()
    assert _values(broker.bootstrap, 0) == [b"plain-0", b"plain-1"]
    assert _values(broker.bootstrap, 1) == [b"idem-0", b"idem-1", b"idem-2"]
    assert _producers(broker.bootstrap, 1) == before, "the idempotent producer's state came back from its snapshot"
    assert "│" not in _producers(broker.bootstrap, 0), "the plain log's state is empty, without a replay"
    _produce(broker.bootstrap, 0, [b"plain-2"], idempotent=False)
    assert _values(broker.bootstrap, 0) == [b"plain-0", b"plain-1", b"plain-2"]
    assert broker.stop() == 0
