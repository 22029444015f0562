"""Several log directories (Kafka's ``log.dirs``): placement, per-directory checkpoints, loading, a failed
directory going offline while the others keep serving."""

from __future__ import annotations

import pytest
from logtest_helpers import append, read_all
from test_disk_errors import _fail_writes

from odradek.broker.log import checkpoint
from odradek.broker.log.manager import CLEAN_SHUTDOWN_FILE, HIGH_WATERMARK_FILE, LogManager
from odradek.errors import ErrorCode, KafkaError


def _dirs(tmp_path, n=2):
    return [tmp_path / f"d{i}" for i in range(n)]


def test_new_partitions_go_to_the_directory_with_fewest(tmp_path, clock):
    a, b = _dirs(tmp_path)
    manager = LogManager([a, b], clock, broker_id=3)
    manager.load()
    placed = [manager.log_dir_of(manager.get_or_create("t", p, {})) for p in range(4)]
    assert placed == [a, b, a, b]
    manager.delete_partition("t", 0)
    assert manager.log_dir_of(manager.get_or_create("u", 0, {})) == a  # a now holds one, b two
    for d in (a, b):
        assert "broker.id=3" in (d / "meta.properties").read_text()
    manager.close()


def test_each_directory_checkpoints_its_own_and_reload_finds_all(tmp_path, clock):
    a, b = _dirs(tmp_path)
    manager = LogManager([a, b], clock)
    manager.load()
    for p in range(3):
        plog = manager.get_or_create("t", p, {})
        append(plog, p + 1)
        plog.high_watermark = plog.log_end_offset
    manager.close()
    assert checkpoint.read_offsets(a / HIGH_WATERMARK_FILE) == {("t", 0): 1, ("t", 2): 3}
    assert checkpoint.read_offsets(b / HIGH_WATERMARK_FILE) == {("t", 1): 2}
    assert (a / CLEAN_SHUTDOWN_FILE).exists() and (b / CLEAN_SHUTDOWN_FILE).exists()
    again = LogManager([a, b], clock)
    again.load()
    assert {tp: p.log_end_offset for tp, p in again} == {("t", 0): 1, ("t", 1): 2, ("t", 2): 3}
    assert again.log_dir_of(again.get("t", 1)) == b
    again.close()


def test_same_partition_in_two_directories_is_refused(tmp_path, clock):
    a, b = _dirs(tmp_path)
    (a / "t-0").mkdir(parents=True)
    (b / "t-0").mkdir(parents=True)
    with pytest.raises(ValueError, match="duplicate"):
        LogManager([a, b], clock).load()


def test_a_disk_error_takes_its_whole_directory_offline(tmp_path, clock):
    a, b = _dirs(tmp_path)
    manager = LogManager([a, b], clock)
    failed = []
    manager.on_dir_failure.append(failed.append)
    manager.load()
    bad, good, neighbour = (manager.get_or_create("t", p, {}) for p in range(3))  # a, b, a
    append(bad, 1)
    _fail_writes(bad)
    with pytest.raises(KafkaError) as info:
        append(bad, 1)
    assert info.value.code == ErrorCode.kafka_storage_error
    manager.tick(clock.now_ms())
    assert failed == [a] and manager.offline_dirs == {a}
    assert neighbour.offline  # the healthy partition of the failed directory goes too
    with pytest.raises(KafkaError):
        append(neighbour, 1)
    assert append(good, 1).first_offset == 0
    assert manager.log_dir_of(manager.get_or_create("new", 0, {})) == b  # nothing new lands on a failed disk
    states = {s.path: s for s in manager.describe()}
    assert not states[a].online and states[a].partition_sizes == {}
    assert states[b].online and set(states[b].partition_sizes) == {("t", 1), ("new", 0)}
    manager.close()


def test_a_replica_moves_while_appends_continue(tmp_path, clock):
    a, b = _dirs(tmp_path)
    manager = LogManager([a, b], clock)
    manager.load()
    replaced = {}
    manager.on_log_replaced.append(replaced.__setitem__)
    plog = manager.get_or_create("t", 0, {"segment.bytes": "20000"})
    for _ in range(200):
        append(plog, 5)
    plog.assign_epoch(3, plog.log_end_offset)  # a leadership with no batch yet: copied from the cache itself
    assert manager.log_dir_of(plog) == a
    assert manager.alter_log_dir("t", 0, str(b)) == ErrorCode.none
    appended = 1000
    while not manager.wait_for_moves(0):  # keep writing through whichever log is current, as the broker does
        try:
            append(manager.get("t", 0), 1, epoch=3)
            appended += 1
        except KafkaError as exc:  # the old log, refused after the swap: a client would retry
            assert exc.code == ErrorCode.kafka_storage_error
    moved = manager.get("t", 0)
    assert replaced == {("t", 0): moved}
    assert manager.log_dir_of(moved) == b and moved.log_end_offset == appended
    assert moved.epoch_entries == [(0, 0), (3, 1000)]
    assert append(moved, 1, epoch=3).first_offset == appended
    assert read_all(moved)[-1][0] == appended and len(read_all(moved)) == appended + 1
    assert not (a / "t-0").exists() and [p.name for p in b.iterdir() if p.is_dir()] == ["t-0"]
    manager.close()
    again = LogManager([a, b], clock)
    again.load()
    assert again.log_dir_of(again.get("t", 0)) == b and again.get("t", 0).log_end_offset == appended + 1
    again.close()


def test_move_errors_are_kafkas(tmp_path, clock):
    a, b = _dirs(tmp_path)
    manager = LogManager([a, b], clock)
    manager.load()
    manager.get_or_create("t", 0, {})
    assert manager.alter_log_dir("t", 0, str(tmp_path / "elsewhere")) == ErrorCode.log_dir_not_found
    assert manager.alter_log_dir("t", 9, str(b)) == ErrorCode.replica_not_available
    assert manager.alter_log_dir("t", 0, str(a)) == ErrorCode.none  # already there
    manager.fail_dir(b, "test")
    assert manager.alter_log_dir("t", 0, str(b)) == ErrorCode.kafka_storage_error
    manager.close()


def test_a_log_that_should_exist_is_not_recreated_while_a_dir_is_offline(tmp_path, clock):
    a, b = _dirs(tmp_path)
    manager = LogManager([a, b], clock)
    manager.load()
    manager.fail_dir(a, "test")
    with pytest.raises(KafkaError) as info:
        manager.get_or_create("t", 0, {}, is_new=False)  # it may sit on the failed disk
    assert info.value.code == ErrorCode.kafka_storage_error
    assert manager.log_dir_of(manager.get_or_create("t", 0, {}, is_new=True)) == b
    manager.close()


def test_a_truncation_of_the_current_log_restarts_the_copy(tmp_path, clock):
    from odradek.broker.log.mover import Move, _copy_some, future_dir

    a, b = _dirs(tmp_path)
    manager = LogManager([a, b], clock)
    manager.load()
    current = manager.get_or_create("t", 0, {})
    for _ in range(10):
        append(current, 1)
    move = Move(("t", 0), b)
    future = manager.get_or_create("f", 0, {})  # any empty log stands in for the future one
    assert future_dir(b, ("t", 0)).name.endswith("-future")
    while _copy_some(move, current, future):
        pass
    assert future.log_end_offset == 10
    current.truncate_to(5)  # a follower's truncation after a leader change, then different data
    for _ in range(7):
        append(current, 1, epoch=1, value=b"new")
    while _copy_some(move, current, future):
        pass
    assert read_all(future) == read_all(current) and future.log_end_offset == 12
    assert future.epoch_entries == current.epoch_entries == [(0, 0), (1, 5)]
    manager.close()
