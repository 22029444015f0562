"""More logs than descriptors: segment files are reopened on use, least recently used closed, data intact."""

from __future__ import annotations

import os
import threading

from logtest_helpers import append, read_all

from odradek.broker.log.handles import OpenFiles
from odradek.broker.log.partition_log import PartitionLog
from odradek.broker.topic_config import LogConfig


def _logs(tmp_path, clock, files, count):
    return [PartitionLog.open(tmp_path / f"t-{i}", LogConfig(), clock, files=files) for i in range(count)]


def test_many_logs_share_a_few_descriptors_and_lose_nothing(tmp_path, clock):
    files = OpenFiles(capacity=4)
    logs = _logs(tmp_path, clock, files, 12)
    for _ in range(3):
        for plog in logs:
            append(plog, 2)
            assert len(files) <= 4
    for plog in logs:
        plog.flush()
    assert files.opens > 12  # descriptors were closed and files reopened
    for plog in logs:
        assert plog.log_end_offset == 6
        assert len(read_all(plog)) == 6
    for plog in logs:
        plog.close()
    assert len(files) == 0
    reopened = _logs(tmp_path, clock, OpenFiles(capacity=2), 12)
    assert [p.log_end_offset for p in reopened] == [6] * 12


def test_a_pinned_descriptor_is_not_closed_under_its_user(tmp_path, clock):
    files = OpenFiles(capacity=1)
    first, *others = _logs(tmp_path, clock, files, 4)
    append(first, 1)
    segment = first.segments[-1]
    with files.use(segment) as fd:
        for plog in others:
            append(plog, 1)  # each wants a descriptor; the pinned one must survive
        assert files.is_open(segment)
        assert os.fstat(fd).st_ino == os.stat(segment.log_path).st_ino
    append(others[0], 1)
    assert len(files) == 1 and not files.is_open(segment)


def test_threads_reading_and_writing_through_a_tiny_set_see_their_own_files(tmp_path, clock):
    files = OpenFiles(capacity=2)
    logs = _logs(tmp_path, clock, files, 6)
    errors: list[BaseException] = []

    def work(plog: PartitionLog) -> None:
        try:
            for n in range(1, 41):
                append(plog, 1)
                records = read_all(plog)
                assert len(records) == n, (plog.name, n, len(records))
        except BaseException as exc:  # reported to the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(plog,)) for plog in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]
    assert [p.log_end_offset for p in logs] == [40] * 6
