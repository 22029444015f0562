"""How a broker fences controller requests (Kafka's KafkaApis.isBrokerEpochStale and the controller epoch check)."""

from __future__ import annotations

from odradek.broker.link.controller_requests import fence
from odradek.errors import ErrorCode


def test_an_older_controller_epoch_is_a_zombies() -> None:
    assert fence(4, -1, newest_controller_epoch=5, own_broker_epoch=100) == ErrorCode.stale_controller_epoch
    assert fence(5, 100, newest_controller_epoch=5, own_broker_epoch=100) == ErrorCode.none
    assert fence(6, 100, newest_controller_epoch=5, own_broker_epoch=100) == ErrorCode.none


def test_a_broker_epoch_below_the_brokers_own_was_meant_for_an_earlier_incarnation() -> None:
    assert fence(5, 99, newest_controller_epoch=5, own_broker_epoch=100) == ErrorCode.stale_broker_epoch
    assert fence(5, -1, newest_controller_epoch=5, own_broker_epoch=100) == ErrorCode.none


def test_a_broker_epoch_above_the_brokers_own_is_its_new_registration_not_yet_read_back() -> None:
    # Found by the lab (nemesis seed 11, a broker paused past its session): the controller saw the re-registration
    # and sent LeaderAndIsr before the broker had read its own new epoch; refusing it left the broker idle.
    assert fence(7, 34359738528, newest_controller_epoch=7, own_broker_epoch=34359738473) == ErrorCode.none
