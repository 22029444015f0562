"""Transactional requests by hand (kio entities over :class:`odradek.client.KafkaConnection`), for the tests that
need exact control of what is sent."""

from __future__ import annotations

import datetime
import sys
import time
from typing import Any

from kio.index import load_request_schema

from odradek.client import KafkaConnection
from odradek.errors import ErrorCode as E
from odradek.protocol.records import encode_batch


def call(c: KafkaConnection, api: int, version: int, /, **values: Any) -> Any:
    cls = load_request_schema(api, version)
    return c.request(api, cls(**values), version)


def nested(api: int, version: int, name: str) -> Any:
    return getattr(sys.modules[load_request_schema(api, version).__module__], name)


def init(c: KafkaConnection, tid: str, version: int = 4, **extra: Any) -> Any:
    values: dict[str, Any] = {"transactional_id": tid, "transaction_timeout": datetime.timedelta(seconds=60)}
    if version >= 3:
        values.update(producer_id=-1, producer_epoch=-1)
    values.update(extra)
    deadline = time.monotonic() + 30
    while True:
        answer = call(c, 22, version, **values)
        # right after the topic is created its partitions may still be loading
        if answer.error_code is not E.coordinator_load_in_progress or time.monotonic() > deadline:
            return answer
        time.sleep(0.05)


def add_partitions(c: KafkaConnection, tid: str, pid: int, epoch: int, parts: list[tuple[str, int]],
                   version: int = 3) -> dict[tuple[str, int], E]:
    topic_cls = nested(24, version, "AddPartitionsToTxnTopic")
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    answer = call(c, 24, version, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                  v3_and_below_producer_epoch=epoch,
                  v3_and_below_topics=tuple(topic_cls(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))
    return {(t.name, r.partition_index): r.partition_error_code
            for t in answer.results_by_topic_v3_and_below for r in t.results_by_partition}


def end_txn(c: KafkaConnection, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> E:
    answer = call(c, 26, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
    return E(answer.error_code)


def produce_txn(c: KafkaConnection, topic: str, tid: str, pid: int, epoch: int, partition: int, seq: int = 0) -> E:
    batch = bytes(encode_batch([(None, b"v", [])], timestamp_ms=int(time.time() * 1000), producer_id=pid,
                               producer_epoch=epoch, base_sequence=seq, transactional=True))
    data_cls = nested(0, 9, "TopicProduceData")
    part_cls = nested(0, 9, "PartitionProduceData")
    answer = call(c, 0, 9, transactional_id=tid, acks=-1, timeout=datetime.timedelta(seconds=10),
                  topic_data=(data_cls(name=topic, partition_data=(part_cls(index=partition, records=batch),)),))
    return E(answer.responses[0].partition_responses[0].error_code)


def txn_state(c: KafkaConnection, tid: str) -> str:
    return str(call(c, 65, 0, transactional_ids=(tid,)).transaction_states[0].transaction_state)


def wait_for_state(c: KafkaConnection, tid: str, state: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while txn_state(c, tid) != state:
        assert time.monotonic() < deadline, f"{tid} never reached {state}"
        time.sleep(0.05)
