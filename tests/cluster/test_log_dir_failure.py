"""A failed log directory on a two-broker cluster: the directory goes offline without stopping its broker, the
controller moves leadership of its partitions to the other broker, the broker keeps serving its other directory,
and nothing acknowledged is lost."""

from __future__ import annotations

import os

from workload import Load, check_nothing_lost, read_back

from brokers import wait_for
from odradek.admin import create_topic
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

TOPIC = "jbod"
PARTITIONS = 4


def _fail_next_write(plog) -> None:
    """The log's active segment descriptor now points at /dev/full: its next write fails with ENOSPC."""
    segment = plog.segments[-1]
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        with segment.files.use(segment) as fd:
            os.dup2(full, fd)
    finally:
        os.close(full)


def test_failed_log_dir_moves_leadership_and_keeps_the_broker(cluster_factory, tmp_path) -> None:
    cluster = cluster_factory(2, overrides={"log.dirs": f"{tmp_path / 'disk-a'},{tmp_path / 'disk-b'}"})
    with KafkaConnection(cluster.bootstrap) as conn:
        error, message = create_topic(conn, TOPIC, PARTITIONS, 2, {"min.insync.replicas": "1"})
    assert error == ErrorCode.none, message
    wait_for(lambda: cluster.full_isr(TOPIC, PARTITIONS), what="full ISR")
    load = Load(cluster.bootstrap, TOPIC, PARTITIONS)
    try:
        load.progress(300)
        victim = cluster.leader_of(TOPIC, 0)
        broker = cluster.broker(victim)
        logs = broker.replicas.logs
        failed_dir = cluster.run(lambda: logs.log_dir_of(logs.get(TOPIC, 0)))
        other_dir = next(d for d in logs.log_dirs if d != failed_dir)
        cluster.run(lambda: _fail_next_write(logs.get(TOPIC, 0)))
        wait_for(lambda: cluster.run(lambda: failed_dir in logs.offline_dirs), what="the directory offline")
        wait_for(lambda: cluster.leader_of(TOPIC, 0) not in (victim, -1), what="leadership moved away")
        load.progress(300)
        assert broker.running and logs.offline_dirs == {failed_dir}
        assert cluster.znode(f"/brokers/ids/{victim}") is not None  # still registered, still serving
        still_there = cluster.run(lambda: {tp for tp, p in logs
                                           if tp[0] == TOPIC and logs.log_dir_of(p) == other_dir and not p.offline})
        assert still_there  # the other directory's replicas stay online and keep replicating
        for tp in still_there:
            ends = cluster.run(lambda tp=tp: logs.get(*tp).log_end_offset)
            wait_for(lambda tp=tp, ends=ends: cluster.run(lambda: logs.get(*tp).log_end_offset > ends),
                     what=f"{tp} written after the failure")
        for p in range(PARTITIONS):  # no partition is led from the failed directory
            leader = cluster.leader_of(TOPIC, p)
            assert leader != -1
            if leader == victim:
                assert cluster.run(lambda p=p: logs.log_dir_of(logs.get(TOPIC, p))) == other_dir
    finally:
        load.finish()
    check_nothing_lost(load, read_back(cluster.bootstrap, TOPIC, PARTITIONS))


def test_broker_stops_when_every_log_dir_has_failed(cluster_factory, tmp_path) -> None:
    cluster = cluster_factory(2, overrides={"log.dirs": f"{tmp_path / 'disk-a'},{tmp_path / 'disk-b'}"})
    victim = cluster.broker_ids[-1]
    broker = cluster.broker(victim)
    logs = broker.replicas.logs
    first, second = logs.log_dirs
    cluster.run(lambda: logs.fail_dir(first, "test"))
    wait_for(lambda: cluster.run(lambda: first in logs.offline_dirs), what="the first directory offline")
    assert broker.running  # one directory left: still serving
    cluster.run(lambda: logs.fail_dir(second, "test"))
    wait_for(lambda: cluster.run(lambda: broker.halted.is_set()), what="the broker stopped")
    assert not broker.running
    wait_for(lambda: cluster.znode(f"/brokers/ids/{victim}") is None, what="its registration gone")
