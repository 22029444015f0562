"""A new leader's high watermark and KIP-207: "latest" is withheld until it reaches the epoch's start offset."""

from __future__ import annotations

from logtest_helpers import T0

from odradek.broker.replica import Partition
from odradek.protocol.records import encode_batch, validate_produce


def _follower_append(log, base: int, count: int, epoch: int) -> None:
    buf = encode_batch([(None, b"r", [])] * count, base_offset=base, timestamp_ms=T0, partition_leader_epoch=epoch)
    log.append_as_follower(buf, validate_produce(buf))


def test_a_new_leader_withholds_latest_until_its_high_watermark_reaches_the_epoch_start(open_log, clock):
    log = open_log()
    part = Partition("topic", 0, log, broker_id=1, clock=clock)
    part.make_follower(leader_id=0, leader_epoch=3, replicas=[0, 1, 2], isr=[0, 1, 2])
    _follower_append(log, 0, 10, 3)
    log.high_watermark = 6  # the old leader had exposed more than this follower had heard of
    assert not part.high_watermark_lagging

    part.make_leader(leader_epoch=4, replicas=[0, 1, 2], isr=[1, 2])
    assert part.epoch_start_offset == 10
    assert part.high_watermark == 6
    assert part.high_watermark_lagging

    part.record_follower_fetch(2, 8)
    assert part.high_watermark == 8 and part.high_watermark_lagging
    part.record_follower_fetch(2, 10)
    assert part.high_watermark == 10
    assert not part.high_watermark_lagging


def test_the_same_epoch_again_keeps_its_start_and_following_clears_it(open_log, clock):
    log = open_log()
    part = Partition("topic", 0, log, broker_id=1, clock=clock)
    part.make_leader(leader_epoch=0, replicas=[1], isr=[1])
    assert part.epoch_start_offset == 0
    buf = encode_batch([(None, b"r", [])] * 5, base_offset=0, timestamp_ms=T0)
    part.append_as_leader(bytearray(buf), validate_produce(buf), T0)
    part.make_leader(leader_epoch=0, replicas=[1], isr=[1])  # a repeated LeaderAndIsr of the same epoch
    assert part.epoch_start_offset == 0
    part.make_follower(leader_id=2, leader_epoch=1, replicas=[1, 2], isr=[1, 2])
    assert part.epoch_start_offset is None and not part.high_watermark_lagging
