"""A broker killed with an aborted transaction and an open one comes back with both: its recovery rebuilds the
``.txnindex`` (deleted here, as a crash before its write reached the disk would lose it) and the open transaction
from the log, so a READ_COMMITTED fetch sees the same last stable offset and aborted list as before."""

from __future__ import annotations

import datetime
import sys
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.index import load_request_schema

from brokers import BrokerProcess, wait_for
from kafka_clients import opened
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.records import iter_batches

TOPIC = "rcr"


def _fetch_committed(bootstrap: str) -> Any:
    cls = load_request_schema(1, 12)
    mod = sys.modules[cls.__module__]
    request = cls(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, isolation_level=1,
        session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
        topics=(mod.FetchTopic(topic=TOPIC, partitions=(mod.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20),)),),
    )
    with KafkaConnection(bootstrap) as conn:
        return conn.request(1, request, 12).responses[0].partitions[0]


def _view(bootstrap: str) -> tuple[int, int, list[tuple[int, int]], list[int]] | None:
    part = _fetch_committed(bootstrap)
    if part.error_code != ErrorCode.none:
        return None
    data = bytes(part.records or b"")
    return (part.high_watermark, part.last_stable_offset,
            [(t.producer_id, t.first_offset) for t in part.aborted_transactions],
            [h.base_offset for _, h in iter_batches(data)])


def test_killed_broker_rebuilds_the_txnindex_and_keeps_the_open_transaction(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    broker = broker_factory("--override", "group.initial.rebalance.delay.ms=0")
    bs = broker.bootstrap
    admin = opened(AdminClient({"bootstrap.servers": bs}))
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)

    aborting = opened(Producer({"bootstrap.servers": bs, "transactional.id": "a-" + uuid.uuid4().hex[:6]}))
    aborting.init_transactions(30)
    aborting.begin_transaction()
    for i in range(3):
        aborting.produce(TOPIC, b"aborted-%d" % i, partition=0)
    aborting.flush(30)
    aborting.abort_transaction(30)  # data at 0 (one batch), its ABORT marker after it
    open_txn = opened(Producer({"bootstrap.servers": bs, "transactional.id": "o-" + uuid.uuid4().hex[:6],
                                "transaction.timeout.ms": 600_000}))
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(TOPIC, b"undecided", partition=0)
    open_txn.flush(30)

    def settled() -> Any:
        view = _view(bs)
        return view is not None and view[0] > view[1] and view  # the undecided record is below the HW

    before = wait_for(settled, what="the open transaction's record")
    hw, lso, aborted, offsets = before
    assert lso == hw - 1, "read_committed stops at the open transaction's one record"
    assert [first for _, first in aborted] == [0]
    assert offsets[0] == 0 and offsets[-1] == lso - 1, "the aborted data and its marker are returned"

    broker.kill()
    index = [p for p in broker.data_dir.rglob(f"{TOPIC}-0/*.txnindex")]
    assert len(index) == 1 and index[0].stat().st_size == 34
    index[0].unlink()
    broker.restart()

    after = wait_for(settled, what="the partition after the restart")
    assert after == before
    assert index[0].stat().st_size == 34
    del aborting, open_txn
