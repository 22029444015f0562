"""Transactional requests sent by hand, the way a buggy or hostile client might: each gets Kafka's error code, and
the broker's state stays usable (a correct transaction afterwards still commits)."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from txn_requests import add_partitions, call, end_txn, init, nested, produce_txn, wait_for_state

from brokers import BrokerProcess
from kafka_clients import opened
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode as E

TOPIC = "bad-txn"


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[KafkaConnection]:
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
    with KafkaConnection(broker.bootstrap) as c:
        found = call(c, 10, 3, key="warm-up", key_type=1)  # creates __transaction_state
        assert found.error_code is E.none
        yield c


def test_unknown_ids_and_producers(conn: KafkaConnection) -> None:
    tid = "never-" + uuid.uuid4().hex[:6]
    assert end_txn(conn, tid, 1, 0, True) is E.invalid_producer_id_mapping
    assert add_partitions(conn, tid, 1, 0, [(TOPIC, 0)]) == {(TOPIC, 0): E.invalid_producer_id_mapping}
    offsets = call(conn, 25, 3, transactional_id=tid, producer_id=1, producer_epoch=0, group_id="g")
    assert offsets.error_code is E.invalid_producer_id_mapping  # AddOffsetsToTxn before InitProducerId
    described = call(conn, 65, 0, transactional_ids=(tid,)).transaction_states[0]
    assert described.error_code is E.transactional_id_not_found
    ok = init(conn, tid)
    assert ok.error_code is E.none
    assert add_partitions(conn, tid, ok.producer_id + 1, 0, [(TOPIC, 0)]) == {(TOPIC, 0): E.invalid_producer_id_mapping}


def test_bad_init_requests(conn: KafkaConnection) -> None:
    tid = "init-" + uuid.uuid4().hex[:6]
    too_long = init(conn, tid, transaction_timeout=datetime.timedelta(milliseconds=900_001))
    assert (too_long.error_code, too_long.producer_id) == (E.invalid_transaction_timeout, -1)
    assert init(conn, tid, producer_id=5, producer_epoch=-1).error_code is E.invalid_request
    assert init(conn, "").error_code is E.invalid_request


def test_idempotent_producer_always_gets_a_new_id(conn: KafkaConnection) -> None:
    """Kafka's coordinator bumps no epoch without a transactional id, KIP-360 fields or not."""
    first = call(conn, 22, 4, transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                 producer_id=-1, producer_epoch=-1)
    assert (first.error_code, first.producer_epoch) == (E.none, 0)
    again = call(conn, 22, 4, transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                 producer_id=first.producer_id, producer_epoch=first.producer_epoch)
    assert again.error_code is E.none
    assert again.producer_id != first.producer_id
    assert again.producer_epoch == 0


def test_out_of_order_transitions_and_stale_epochs(conn: KafkaConnection) -> None:
    tid = "order-" + uuid.uuid4().hex[:6]
    first = init(conn, tid)
    pid, epoch = first.producer_id, first.producer_epoch
    assert end_txn(conn, tid, pid, epoch, True) is E.invalid_txn_state  # EndTxn with no transaction
    assert end_txn(conn, tid, pid, epoch, False) is E.invalid_txn_state
    # a second InitProducerId bumps the epoch: the first one is fenced
    second = init(conn, tid)
    assert (second.producer_id, second.producer_epoch) == (pid, epoch + 1)
    assert add_partitions(conn, tid, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.producer_fenced}
    assert add_partitions(conn, tid, pid, epoch, [(TOPIC, 0)], version=1) == {(TOPIC, 0): E.invalid_producer_epoch}
    assert end_txn(conn, tid, pid, epoch, True, version=1) is E.invalid_producer_epoch
    stale = init(conn, tid, version=4, producer_id=pid, producer_epoch=epoch)
    assert stale.error_code is E.producer_fenced  # KIP-360: another producer took over
    assert init(conn, tid, version=3, producer_id=pid, producer_epoch=epoch).error_code is E.invalid_producer_epoch
    # partitions that do not exist spoil the whole request; internal topics are not a producer's to add
    assert add_partitions(conn, tid, pid, epoch + 1, [(TOPIC, 0), ("no-such-topic", 0)]) == {
        (TOPIC, 0): E.operation_not_attempted, ("no-such-topic", 0): E.unknown_topic_or_partition}
    assert add_partitions(conn, tid, pid, epoch + 1, [("__consumer_offsets", 0)]) == {
        ("__consumer_offsets", 0): E.topic_authorization_failed}
    # the current producer still works: commit, a retried commit, then abort of a finished commit
    assert add_partitions(conn, tid, pid, epoch + 1, [(TOPIC, 0)]) == {(TOPIC, 0): E.none}
    assert produce_txn(conn, TOPIC, tid, pid, epoch + 1, 0) is E.none
    assert end_txn(conn, tid, pid, epoch + 1, True) is E.none
    wait_for_state(conn, tid, "CompleteCommit")
    assert end_txn(conn, tid, pid, epoch + 1, True) is E.none
    assert end_txn(conn, tid, pid, epoch + 1, False) is E.invalid_txn_state


def test_produce_to_a_partition_not_in_the_transaction(conn: KafkaConnection) -> None:
    tid = "unadded-" + uuid.uuid4().hex[:6]
    ok = init(conn, tid)
    pid, epoch = ok.producer_id, ok.producer_epoch
    assert add_partitions(conn, tid, pid, epoch, [(TOPIC, 0)]) == {(TOPIC, 0): E.none}
    assert produce_txn(conn, TOPIC, tid, pid, epoch, 1) is E.invalid_txn_state  # KIP-890: partition 1 was never added
    # an epoch the coordinator never gave
    assert produce_txn(conn, TOPIC, tid, pid, epoch + 1, 0) is E.invalid_producer_epoch
    assert produce_txn(conn, TOPIC, tid, pid, epoch, 0) is E.none
    producers = call(conn, 61, 0, topics=(nested(61, 0, "TopicRequest")(name=TOPIC, partition_indexes=(0, 1)),))
    p0, p1 = producers.topics[0].partitions
    assert [(s.producer_id, s.producer_epoch, s.current_txn_start_offset) for s in p0.active_producers] == [
        (pid, epoch, 0)]
    assert p1.active_producers == ()
    listed = call(conn, 66, 1, state_filters=("Ongoing",), producer_id_filters=(pid,), duration_filter=-1)
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [(tid, "Ongoing")]
    described = call(conn, 65, 0, transactional_ids=(tid,)).transaction_states[0]
    assert (described.transaction_state, [(t.topic, t.partitions) for t in described.topics]) == (
        "Ongoing", [(TOPIC, (0,))])
    assert end_txn(conn, tid, pid, epoch, False) is E.none


def test_write_txn_markers_refusals(conn: KafkaConnection) -> None:
    marker_cls = nested(27, 1, "WritableTxnMarker")
    topic_cls = nested(27, 1, "WritableTxnMarkerTopic")
    answer = call(conn, 27, 1, markers=(marker_cls(
        producer_id=424242, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=(topic_cls(name="no-such-topic", partition_indexes=(0,)),)),))
    [marker] = answer.markers
    assert (marker.producer_id, marker.topics[0].partitions[0].error_code) == (424242, E.unknown_topic_or_partition)


def test_api_versions_advertise_the_transaction_apis(conn: KafkaConnection) -> None:
    assert {k: conn.versions[k] for k in (10, 22, 24, 25, 26, 27, 61, 65, 66)} == {
        10: (0, 6), 22: (0, 5), 24: (0, 5), 25: (0, 4), 26: (0, 4), 27: (1, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1)}


def test_idle_transactional_id_expires(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory("--override", "transactional.id.expiration.ms=500",
                       "--override", "transaction.remove.expired.transaction.cleanup.interval.ms=100")
    tid = "idle-" + uuid.uuid4().hex[:6]
    with KafkaConnection(b.bootstrap) as c:
        assert call(c, 10, 3, key=tid, key_type=1).error_code is E.none
        first = init(c, tid)
        assert first.error_code is E.none
        deadline = time.monotonic() + 30
        # (ListTransactions: kio cannot read DescribeTransactions' start time of -1 for an Empty id)
        while tid in {t.transactional_id for t in call(c, 66, 0, state_filters=(), producer_id_filters=())
                      .transaction_states}:
            assert time.monotonic() < deadline, "the idle id never expired"
            time.sleep(0.05)
        assert end_txn(c, tid, first.producer_id, first.producer_epoch, True) is E.invalid_producer_id_mapping
        again = init(c, tid)  # a new life for the id: a new producer id
        assert again.error_code is E.none and again.producer_id != first.producer_id


def test_find_coordinator_batches_transactional_ids(conn: KafkaConnection, broker: BrokerProcess) -> None:
    found = call(conn, 10, 4, key_type=1, coordinator_keys=("a", "b"))
    assert [(c.key, c.error_code, c.port) for c in found.coordinators] == [
        ("a", E.none, broker.port), ("b", E.none, broker.port)]
    unknown_type = call(conn, 10, 4, key_type=7, coordinator_keys=("a",))
    assert unknown_type.coordinators[0].error_code is E.invalid_request
