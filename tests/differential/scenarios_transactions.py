"""The transaction coordinator and producer state: InitProducerId (22), AddPartitionsToTxn (24),
AddOffsetsToTxn (25), EndTxn (26), TxnOffsetCommit (28), DescribeTransactions (65), ListTransactions (66) and
DescribeProducers (61): a transaction through to its commit, fenced and unknown producers, wrong states."""

from __future__ import annotations

from typing import Any

from differential_corpus import Batch, Call, Ref, Scenario, Topic, coordinator, init_producer, produce

_T = (Topic(),)
_READY = (coordinator("{txn}", 1),)
_INIT = (*_READY, init_producer("{txn}"))


def _init(version: int, txn: str | None = "{txn}", timeout: int = 60000) -> Call:
    return Call(22, version, {"transactional_id": txn, "transaction_timeout": timeout, "producer_id": -1,
                              "producer_epoch": -1})


def _add_partitions(version: int, *, epoch: Any = None, topic: str = "{topic}", pid: Any = None) -> Call:
    pid = Ref("pid") if pid is None else pid
    epoch = Ref("epoch") if epoch is None else epoch
    return Call(24, version, {
        "v3_and_below_transactional_id": "{txn}", "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})


def _end(version: int, committed: bool = True, epoch: Any = None) -> Call:
    return Call(26, version, {"transactional_id": "{txn}", "producer_id": Ref("pid"),
                              "producer_epoch": Ref("epoch") if epoch is None else epoch, "committed": committed})


def _add_offsets(version: int) -> Call:
    return Call(25, version, {"transactional_id": "{txn}", "producer_id": Ref("pid"), "producer_epoch": Ref("epoch"),
                              "group_id": "{group}"})


def _txn_commit(version: int) -> Call:
    return Call(28, version, {"transactional_id": "{txn}", "group_id": "{group}", "producer_id": Ref("pid"),
                              "producer_epoch": Ref("epoch"), "generation_id": -1, "member_id": "",
                              "group_instance_id": None, "topics": [{"name": "{topic}", "partitions": [
                                  {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                   "committed_metadata": ""}]}]})


_ADDED = (*_INIT, _add_partitions(3))
_WRITTEN = (*_ADDED, produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"), base_sequence=0,
                                   transactional=True), transactional_id="{txn}"))
_GROUP_ADDED = (*_INIT, coordinator("{group}"), _add_offsets(3))

SCENARIOS = [
    *(Scenario(f"init-producer-id.v{v}.idempotent", _init(v, None), setup=_READY) for v in range(5)),
    *(Scenario(f"init-producer-id.v{v}.transactional", _init(v), setup=_READY) for v in range(5)),
    Scenario("init-producer-id.v4.again", _init(4), setup=_INIT),
    Scenario("init-producer-id.v4.timeout-too-big", _init(4, timeout=10_000_000), setup=_READY),
    Scenario("init-producer-id.v4.empty-id", _init(4, ""), setup=_READY),
    *(Scenario(f"add-partitions-to-txn.v{v}.first", _add_partitions(v), topics=_T, setup=_INIT) for v in range(4)),
    Scenario("add-partitions-to-txn.v3.unknown-topic", _add_partitions(3), setup=_INIT),
    Scenario("add-partitions-to-txn.v3.fenced-epoch", _add_partitions(3, epoch=-1), topics=_T, setup=_INIT),
    Scenario("add-partitions-to-txn.v3.unknown-producer", _add_partitions(3, pid=987654), topics=_T,
             setup=_INIT),
    Scenario("add-partitions-to-txn.v4.verify-only", Call(24, 4, {"transactions": [{
        "transactional_id": "{txn}", "producer_id": Ref("pid"), "producer_epoch": Ref("epoch"), "verify_only": True,
        "topics": [{"name": "{topic}", "partitions": [0]}]}]}), topics=_T, setup=_ADDED),
    *(Scenario(f"end-txn.v{v}.commit", _end(v), topics=_T, setup=_WRITTEN) for v in range(4)),
    Scenario("end-txn.v3.abort", _end(3, committed=False), topics=_T, setup=_WRITTEN),
    Scenario("end-txn.v3.nothing-to-commit", _end(3), setup=_INIT),
    Scenario("end-txn.v3.fenced-epoch", _end(3, epoch=0), topics=_T,
             setup=(*_INIT, init_producer("{txn}", prefix="again-"))),
    Scenario("end-txn.v3.unknown-transactional-id", Call(26, 3, {"transactional_id": "{txn}", "producer_id": 1,
                                                                 "producer_epoch": 0, "committed": True}),
             setup=_READY),
    *(Scenario(f"add-offsets-to-txn.v{v}.group", _add_offsets(v), setup=(*_INIT, coordinator("{group}")))
      for v in range(4)),
    *(Scenario(f"txn-offset-commit.v{v}.after-add-offsets", _txn_commit(v), topics=_T, setup=_GROUP_ADDED)
      for v in range(4)),
    Scenario("txn-offset-commit.v3.without-add-offsets", _txn_commit(3), topics=_T,
             setup=(*_INIT, coordinator("{group}"))),
    Scenario("describe-transactions.v0.ongoing", Call(65, 0, {"transactional_ids": ["{txn}"]}), topics=_T,
             setup=_WRITTEN),
    Scenario("describe-transactions.v0.unknown", Call(65, 0, {"transactional_ids": ["{txn}"]}), setup=_READY),
    *(Scenario(f"list-transactions.v{v}.unknown-producer-filter", Call(66, v, {
        "state_filters": [], "producer_id_filters": [424242], "duration_filter": -1}), setup=_READY)
      for v in range(2)),
    Scenario("list-transactions.v1.unknown-state-filter", Call(66, 1, {
        "state_filters": ["Nonsense"], "producer_id_filters": [], "duration_filter": -1}), setup=_READY),
    Scenario("list-transactions.v0.ongoing", Call(66, 0, {"state_filters": [], "producer_id_filters": []}),
             topics=_T, setup=_WRITTEN, own="transaction_states"),
    Scenario("list-transactions.v1.ongoing-filter", Call(66, 1, {"state_filters": ["Ongoing"],
                                                                 "producer_id_filters": [], "duration_filter": -1}),
             topics=_T, setup=_WRITTEN, own="transaction_states"),
    Scenario("describe-producers.v0.idempotent", Call(61, 0, {"topics": [{"name": "{topic}",
                                                                          "partition_indexes": [0]}]}),
             topics=_T, setup=(init_producer(), produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"),
                                                              base_sequence=0)))),
    Scenario("describe-producers.v0.unknown-partition", Call(61, 0, {"topics": [{"name": "{topic}",
                                                                                 "partition_indexes": [5]}]}),
             topics=_T),
]
