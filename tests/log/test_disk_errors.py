"""Disk errors take a log offline with KAFKA_STORAGE_ERROR; they never corrupt what was already written."""

from __future__ import annotations

import os

import pytest
from logtest_helpers import append, read_all

from odradek.broker.log.manager import LogManager
from odradek.errors import ErrorCode, KafkaError


def _storage_error(call):
    with pytest.raises(KafkaError) as info:
        call()
    assert info.value.code == ErrorCode.kafka_storage_error


def _redirect(log, device, flags):
    """Point the active segment's open descriptor at a device, so the next system call on it fails."""
    segment = log.segments[-1]
    other = os.open(device, flags)
    try:
        with segment.files.use(segment) as fd:
            os.dup2(other, fd)
    finally:
        os.close(other)


def _fail_writes(log):
    """The next write fails with ENOSPC, as on a full disk."""
    _redirect(log, "/dev/full", os.O_WRONLY)


def test_failed_write_takes_the_log_offline_and_keeps_earlier_data(open_log):
    log = open_log()
    for _ in range(3):
        append(log, 2)
    log.flush()
    before = read_all(log)
    _fail_writes(log)
    _storage_error(lambda: append(log, 1))
    assert log.offline
    _storage_error(lambda: append(log, 1))
    _storage_error(lambda: log.read(0, 100))
    _storage_error(log.flush)
    for segment in log.segments:
        segment.close()
    reopened = open_log()
    assert reopened.log_end_offset == 6
    assert read_all(reopened) == before
    assert append(reopened, 1).first_offset == 6


def test_descriptor_refusing_writes_is_a_storage_error(open_log):
    log = open_log()
    append(log, 1)
    _redirect(log, "/dev/zero", os.O_RDONLY)  # EBADF on write
    _storage_error(lambda: append(log, 1))
    assert log.offline


def test_manager_keeps_serving_other_partitions(tmp_path, clock):
    manager = LogManager(tmp_path, clock)
    manager.load()
    bad = manager.get_or_create("t", 0, {})
    good = manager.get_or_create("t", 1, {})
    append(bad, 1)
    _fail_writes(bad)
    _storage_error(lambda: append(bad, 1))
    clock.advance(10_000)
    manager.tick(clock.now_ms())  # skips the offline log, checkpoints the rest
    assert append(good, 1).first_offset == 0
    manager.close()
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # an offline log makes the shutdown unclean
