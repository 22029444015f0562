"""Produce (0): every version, acks, unknown topics and partitions, corrupt and oversize batches, codecs,
idempotent sequences and producer epochs."""

from __future__ import annotations

from differential_corpus import Batch, Ref, Scenario, Topic, coordinator, init_producer, produce

_GZIP, _SNAPPY, _LZ4, _ZSTD = 1, 2, 3, 4

SCENARIOS = [
    *(Scenario(f"produce.v{v}.acks-all", produce(version=v), topics=(Topic(),)) for v in range(3, 12)),
    *(Scenario(f"produce.v{v}.acks-leader", produce(version=v, acks=1), topics=(Topic(),)) for v in (3, 7, 9, 11)),
    *(Scenario(f"produce.v{v}.unknown-topic", produce(version=v)) for v in (3, 8, 9, 11)),
    *(Scenario(f"produce.v{v}.unknown-partition", produce(version=v, partition=7), topics=(Topic(),))
      for v in (3, 9, 11)),
    Scenario("produce.v9.negative-partition", produce(partition=-1), topics=(Topic(),)),
    *(Scenario(f"produce.v{v}.invalid-acks", produce(version=v, acks=2), topics=(Topic(),)) for v in (3, 9)),
    *(Scenario(f"produce.v{v}.corrupt-crc", produce(Batch(corrupt_crc=True), version=v), topics=(Topic(),))
      for v in (3, 9, 11)),
    Scenario("produce.v9.truncated-batch", produce(Batch(truncate=3)), topics=(Topic(),)),
    Scenario("produce.v9.bad-length-batch", produce(Batch(truncate=60)), topics=(Topic(),)),
    Scenario("produce.v9.two-plain-batches", produce(Batch(repeat=2)), topics=(Topic(),)),
    Scenario("produce.v9.magic-1-batch", produce(Batch(magic=1)), topics=(Topic(),)),
    Scenario("produce.v9.second-batch", produce(), topics=(Topic(),), setup=(produce(),)),
    Scenario("produce.v9.three-records", produce(Batch(values=(b"a", b"b", b"c"))), topics=(Topic(),)),
    Scenario("produce.v9.keyed", produce(Batch(values=(b"a", None), keys=(b"k", b"k"))), topics=(Topic(),)),
    *(Scenario(f"produce.v9.codec-{name}", produce(Batch(values=(b"x" * 100, b"y" * 100), compression=codec)),
               topics=(Topic(),))
      for name, codec in (("gzip", _GZIP), ("snappy", _SNAPPY), ("lz4", _LZ4), ("zstd", _ZSTD))),
    Scenario("produce.v7.zstd-too-old", produce(Batch(compression=_ZSTD), version=7), topics=(Topic(),)),
    Scenario("produce.v9.message-too-large", produce(Batch(values=(b"x" * 500,))),
             topics=(Topic(configs={"max.message.bytes": "200"}),)),
    Scenario("produce.v9.log-append-time", produce(),
             topics=(Topic(configs={"message.timestamp.type": "LogAppendTime"}),)),
    Scenario("produce.v9.timestamp-out-of-range", produce(Batch(timestamp_ms=1)),
             topics=(Topic(configs={"message.timestamp.difference.max.ms": "1000"}),)),
    Scenario("produce.v9.compact-needs-keys", produce(),
             topics=(Topic(configs={"cleanup.policy": "compact"}),)),
    Scenario("produce.v9.idempotent-first", produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"),
                                                          base_sequence=0)),
             topics=(Topic(),), setup=(init_producer(),)),
    Scenario("produce.v9.idempotent-out-of-order", produce(Batch(producer_id=Ref("pid"),
                                                                 producer_epoch=Ref("epoch"), base_sequence=5)),
             topics=(Topic(),), setup=(init_producer(),)),
    Scenario("produce.v9.idempotent-duplicate",
             produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"), base_sequence=0)),
             topics=(Topic(),), setup=(init_producer(), produce(Batch(producer_id=Ref("pid"),
                                                                      producer_epoch=Ref("epoch"), base_sequence=0)))),
    Scenario("produce.v9.idempotent-gap",
             produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"), base_sequence=3)),
             topics=(Topic(),), setup=(init_producer(), produce(Batch(producer_id=Ref("pid"),
                                                                      producer_epoch=Ref("epoch"), base_sequence=0)))),
    Scenario("produce.v9.idempotent-two-batches-in-order",
             produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"), base_sequence=0, repeat=2)),
             topics=(Topic(),), setup=(init_producer(),)),
    Scenario("produce.v9.unknown-producer-id", produce(Batch(producer_id=424242, producer_epoch=0,
                                                            base_sequence=0)), topics=(Topic(),)),
    Scenario("produce.v9.transactional-without-txn",
             produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"), base_sequence=0,
                           transactional=True), transactional_id="{txn}"),
             topics=(Topic(),), setup=(init_producer(),)),
    Scenario("produce.v9.stale-epoch",
             produce(Batch(producer_id=Ref("old-pid"), producer_epoch=Ref("old-epoch"), base_sequence=1)),
             topics=(Topic(),),
             setup=(coordinator("{txn}", 1), init_producer("{txn}", prefix="old-"), init_producer("{txn}"),
                    produce(Batch(producer_id=Ref("pid"), producer_epoch=Ref("epoch"), base_sequence=0)))),
]
