"""A paused broker (SIGSTOP, in process): short pauses are ridden out, long ones cost it its session and its
leaderships, and when it runs again it rejoins without losing or resurrecting anything (issue 5)."""

from __future__ import annotations

from workload import Load, check_nothing_lost, create_replicated_topic, read_back

from brokers import wait_for
from odradek.admin import create_topic
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

TOPIC = "frozen"
PARTITIONS = 3


def test_a_leader_paused_past_its_session_loses_leadership_and_rejoins_after_resuming(cluster_factory) -> None:
    c = cluster_factory(3)
    create_replicated_topic(c.bootstrap, TOPIC, PARTITIONS)
    load = Load(c.bootstrap, TOPIC, PARTITIONS)
    try:
        load.progress(300)
        victim = c.leader_of(TOPIC, 0)
        epoch_before = c.partition_meta(TOPIC, 0).leader_epoch
        c.pause(victim)
        # the session (2 s) expires while paused: the controller moves every leadership it held
        wait_for(lambda: c.leader_of(TOPIC, 0) not in (victim, -1), 60, what="a new leader while paused")
        assert c.partition_meta(TOPIC, 0).leader_epoch > epoch_before
        load.progress(300)
        c.resume(victim)
        wait_for(lambda: c.full_isr(TOPIC, PARTITIONS), 60, what="the resumed broker back in every ISR")
        load.progress(300)
    finally:
        load.finish()
    check_nothing_lost(load, read_back(c.bootstrap, TOPIC, PARTITIONS))


def test_a_paused_controller_holds_admin_requests_to_their_timeouts(cluster_factory) -> None:
    c = cluster_factory(3, overrides={"zookeeper.session.timeout.ms": "30000"})
    wait_for(lambda: c.controller_id() is not None, 30, what="a controller")
    controller = c.controller_id()
    assert controller is not None
    other = next(b for b in range(3) if b != controller)
    address = f"127.0.0.1:{c.broker(other).port}"
    c.pause(controller)
    try:
        with KafkaConnection(address, timeout=60) as conn:
            # nothing can lead the topic while the controller stands still: the answer comes at the timeout
            error, _ = create_topic(conn, "held", 1, 3, {}, timeout_s=0.5)
            assert error == ErrorCode.request_timed_out
            # timeout 0: answered as soon as the topic is written, as Kafka does
            error, message = create_topic(conn, "unwaited", 1, 3, {}, timeout_s=0)
            assert error == ErrorCode.none, message
    finally:
        c.resume(controller)
    # the timed-out creation still stands: both topics get leaders once the controller runs again
    wait_for(lambda: all(c.partition_meta(t, 0) is not None and c.partition_meta(t, 0).leader >= 0
                         for t in ("held", "unwaited")), 30, what="both topics led once the controller runs")


def test_a_controller_paused_past_its_session_is_replaced_and_steps_down_when_it_runs_again(cluster_factory) -> None:
    c = cluster_factory(3)
    create_replicated_topic(c.bootstrap, TOPIC, PARTITIONS)
    wait_for(lambda: c.controller_id() is not None and c.full_isr(TOPIC, PARTITIONS), 30,
             what="a controller and full ISRs")
    old = c.controller_id()
    assert old is not None
    epoch = c.controller_epoch(old)
    c.pause(old)
    wait_for(lambda: c.controller_id() not in (None, old), 30, what="another controller while the old one is paused")
    new = c.controller_id()
    assert new is not None and c.controller_epoch(new) > epoch
    wait_for(lambda: all(c.leader_of(TOPIC, p) not in (old, -1) for p in range(PARTITIONS)), 30,
             what="the paused broker's leaderships moved")
    c.resume(old)
    wait_for(lambda: not c.run(lambda: c.broker(old).controller.is_active), 30,
             what="the resumed old controller stepping down")
    wait_for(lambda: c.full_isr(TOPIC, PARTITIONS), 60, what="the resumed broker back in every ISR")
    assert c.controller_id() == new
