"""Recovery on open: unclean reopen, torn tail, corrupt CRC, garbage, lost indexes. Nothing before the bad
batch may be lost, and the log must keep working after it."""

from __future__ import annotations

import logging
import os

from logtest_helpers import append, read_all

from odradek.broker.log.segment import LOG_SUFFIX
from odradek.broker.topic_config import LogConfig


def _segment_file(tmp_path, base=0):
    return tmp_path / "topic-0" / f"{base:020d}{LOG_SUFFIX}"


def _abandon(log):
    """Like a killed process: file descriptors go away, nothing is flushed or checkpointed."""
    for segment in log.segments:
        segment.close()


def test_reopen_without_close_keeps_every_batch(open_log):
    log = open_log(LogConfig(segment_bytes=1_000))
    for _ in range(50):
        append(log, 2)
    before = read_all(log)
    _abandon(log)
    reopened = open_log(LogConfig(segment_bytes=1_000))
    assert reopened.log_end_offset == 100
    assert read_all(reopened) == before


def test_clean_reopen_keeps_state(open_log):
    log = open_log()
    for _ in range(10):
        append(log, 3)
    log.close()
    reopened = open_log(recovery_point=30, clean_shutdown=True)
    assert reopened.log_end_offset == 30
    assert len(read_all(reopened)) == 30


def test_torn_tail_is_truncated_to_the_last_whole_batch(open_log, tmp_path, caplog):
    log = open_log()
    for _ in range(5):
        append(log, 2)
    log.close()
    path = _segment_file(tmp_path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 7)
    with caplog.at_level(logging.WARNING, logger="odradek.log"):
        reopened = open_log(recovery_point=10, clean_shutdown=True)
    assert reopened.log_end_offset == 8
    assert [o for o, _, _ in read_all(reopened)] == list(range(8))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "topic-0" in warnings[0] and path.name in warnings[0] and "bytes dropped" in warnings[0]
    assert append(reopened, 1).first_offset == 8


def test_corrupt_crc_in_the_tail_is_cut_there(open_log, tmp_path, caplog):
    log = open_log()
    sizes = []
    for _ in range(4):
        append(log, 1, value=b"payload")
        sizes.append(log.segments[-1].size)
    _abandon(log)
    path = _segment_file(tmp_path)
    with open(path, "r+b") as f:
        f.seek(sizes[2] - 3)  # inside the third batch's records
        f.write(b"\xff")
    with caplog.at_level(logging.WARNING, logger="odradek.log"):
        reopened = open_log()
    assert reopened.log_end_offset == 2
    assert path.stat().st_size == sizes[1]
    assert any("CRC" in r.getMessage() for r in caplog.records)


def test_garbage_after_the_last_batch_is_dropped(open_log, tmp_path):
    log = open_log()
    for _ in range(3):
        append(log, 1)
    _abandon(log)
    path = _segment_file(tmp_path)
    good = path.stat().st_size
    with open(path, "ab") as f:
        f.write(os.urandom(300))
    reopened = open_log()
    assert reopened.log_end_offset == 3
    assert path.stat().st_size == good


def test_corruption_in_an_early_segment_drops_later_segments_but_nothing_before(open_log, tmp_path):
    config = LogConfig(segment_bytes=600)
    log = open_log(config)
    for _ in range(30):
        append(log, 1, value=b"z" * 40)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    _abandon(log)
    with open(_segment_file(tmp_path, bases[1]), "r+b") as f:
        f.seek(70)
        f.write(b"\x00\x01\x02")
    reopened = open_log(config)
    assert reopened.log_end_offset == bases[1]
    assert [o for o, _, _ in read_all(reopened)] == list(range(bases[1]))
    assert not _segment_file(tmp_path, bases[2]).exists()


def test_missing_or_corrupt_index_is_rebuilt(open_log, tmp_path):
    config = LogConfig(index_interval_bytes=100, segment_bytes=3_000)
    log = open_log(config)
    for _ in range(60):
        append(log, 1, value=b"q" * 80)
    log.close()
    directory = tmp_path / "topic-0"
    (directory / f"{0:020d}.index").unlink()
    with open(directory / f"{0:020d}.timeindex", "ab") as f:
        f.write(b"\x01\x02\x03")
    reopened = open_log(config, recovery_point=60, clean_shutdown=True)
    assert [o for o, _, _ in read_all(reopened)] == list(range(60))
    assert len(reopened.segments[0].offset_index) > 0
    for offset in range(60):
        assert reopened.read(offset, 1).size > 0


def test_recovery_reads_in_chunks_smaller_than_batches(open_log, tmp_path, monkeypatch):
    from odradek.broker.log import segment as segment_module

    monkeypatch.setattr(segment_module, "RECOVERY_CHUNK", 500)
    log = open_log()
    for i in range(40):
        append(log, 1 + i % 3, value=b"w" * (50 + (i * 37) % 600))
    before = read_all(log)
    _abandon(log)
    path = _segment_file(tmp_path)
    good = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"\x00" * 10 + b"\xff" * 90)
    reopened = open_log()
    assert read_all(reopened) == before
    assert path.stat().st_size == good


def test_random_tail_damage_never_loses_earlier_batches(open_log, tmp_path):
    import random

    rng = random.Random(11)
    for trial in range(15):
        directory = tmp_path / "topic-0"
        if directory.exists():
            import shutil

            shutil.rmtree(directory)
        log = open_log()
        ends = []
        for _ in range(12):
            append(log, rng.randint(1, 3), value=b"d" * rng.randint(1, 300))
            ends.append((log.log_end_offset, log.segments[-1].size))
        _abandon(log)
        path = _segment_file(tmp_path)
        size = path.stat().st_size
        damage_at = rng.randrange(size)
        with open(path, "r+b") as f:
            if trial % 2:
                f.truncate(damage_at)
            else:
                f.seek(damage_at)
                f.write(bytes([rng.randrange(256)]) * rng.randint(1, 8))
        reopened = open_log()
        intact = [(leo, end) for leo, end in ends if end <= damage_at]
        expected_leo = intact[-1][0] if intact else 0
        # everything wholly before the damage survives; a byte rewritten to itself may keep more
        assert reopened.log_end_offset >= expected_leo
        assert [o for o, _, _ in read_all(reopened)] == list(range(reopened.log_end_offset))
        for segment in reopened.segments:
            segment.close()
