"""LogManager: loading a data directory, Kafka's checkpoint files, clean/unclean restarts, topic deletion."""

from __future__ import annotations

import errno
import os
import threading

from logtest_helpers import T0, batch, read_all

from odradek.broker.log import checkpoint, durability, producer_state
from odradek.broker.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    LogManager,
)
from odradek.broker.topic_config import LogConfig


def _fill(manager, topic, partition, n, producer_id=-1, value=b"v"):
    """``n`` one-record batches; with ``producer_id``, from that idempotent producer (epoch 0, sequences 0..)."""
    plog = manager.get_or_create(topic, partition, {})
    for _ in range(n):
        if producer_id >= 0:
            seq = plog.log_end_offset
            buf, headers = batch(1, producer_id=producer_id, producer_epoch=0, base_sequence=seq, value=value)
        else:
            buf, headers = batch(1, value=value)
        plog.append_as_leader(buf, headers, 0, T0)
    plog.high_watermark = plog.log_end_offset
    return plog


def test_checkpoint_files_round_trip_in_kafka_format(tmp_path):
    path = tmp_path / "cp"
    checkpoint.write_offsets(path, {("a", 0): 5, ("my-topic", 12): 7})
    assert path.read_text() == "0\n2\na 0 5\nmy-topic 12 7\n"
    assert checkpoint.read_offsets(path) == {("a", 0): 5, ("my-topic", 12): 7}
    checkpoint.write_epochs(path, [(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert checkpoint.read_epochs(path) == [(0, 0), (3, 120)]
    assert not (tmp_path / "cp.tmp").exists()


def test_close_and_reload_restores_every_partition(tmp_path, clock):
    manager = LogManager(tmp_path, clock, broker_id=1, cluster_id="abc")
    manager.load()
    _fill(manager, "orders", 0, 5)
    _fill(manager, "orders", 1, 3)
    _fill(manager, "my.dotted-topic", 2, 4)
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert checkpoint.read_offsets(tmp_path / HIGH_WATERMARK_FILE) == {
        ("my.dotted-topic", 2): 4, ("orders", 0): 5, ("orders", 1): 3
    }
    assert checkpoint.read_offsets(tmp_path / RECOVERY_POINT_FILE)[("orders", 0)] == 5
    assert checkpoint.read_offsets(tmp_path / LOG_START_FILE)[("orders", 0)] == 0
    assert "broker.id=1" in (tmp_path / "meta.properties").read_text()

    again = LogManager(tmp_path, clock)
    again.load()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert len(again) == 3
    plog = again.get("orders", 0)
    assert plog is not None and plog.log_end_offset == 5 and plog.high_watermark == 5
    assert again.get("my.dotted-topic", 2).log_end_offset == 4
    again.close()


def test_unclean_restart_recovers_from_files(tmp_path, clock):
    manager = LogManager(tmp_path, clock)
    manager.load()
    plog = _fill(manager, "t", 0, 10)
    before = read_all(plog)
    manager.checkpoint()
    for segment in plog.segments:  # no close: as if killed
        segment.close()
    again = LogManager(tmp_path, clock)
    again.load()
    assert read_all(again.get("t", 0)) == before
    again.close()


def test_tick_writes_checkpoints_when_due(tmp_path, clock):
    manager = LogManager(tmp_path, clock, checkpoint_interval_ms=1000)
    manager.load()
    _fill(manager, "t", 0, 2)
    manager.tick(clock.now_ms())
    assert not (tmp_path / HIGH_WATERMARK_FILE).exists()
    clock.advance(1000)
    manager.tick(clock.now_ms())
    manager.wait_for_checkpoint()
    assert checkpoint.read_offsets(tmp_path / HIGH_WATERMARK_FILE) == {("t", 0): 2}
    manager.close()


def _held_writes(monkeypatch):
    """Checkpoint writes wait for ``release`` and record the thread they ran on."""
    release = threading.Event()
    threads: list[str] = []
    real = checkpoint.write_offsets

    def held(path, offsets):
        threads.append(threading.current_thread().name)
        assert release.wait(30), "the test never released the checkpoint write"
        real(path, offsets)

    monkeypatch.setattr(checkpoint, "write_offsets", held)
    return release, threads


def test_tick_returns_while_the_checkpoint_is_written_on_its_own_thread(tmp_path, clock, monkeypatch):
    """Six fsyncs per directory must not stall the broker's event loop (issue 11): the tick that finds a checkpoint
    due hands the offsets it read to the checkpoint thread and returns while the write still waits here."""
    manager = LogManager(tmp_path, clock, checkpoint_interval_ms=1000)
    manager.load()
    plog = _fill(manager, "t", 0, 2)
    release, threads = _held_writes(monkeypatch)
    clock.advance(1000)
    manager.tick(clock.now_ms())  # returns although the write is held
    _fill(manager, "t", 0, 1)  # after the tick read the offsets: the background checkpoint has 2, not 3
    assert plog.high_watermark == 3
    clock.advance(1000)
    manager.tick(clock.now_ms())  # one checkpoint at a time: this tick starts none while the first is held
    release.set()
    manager.wait_for_checkpoint()
    assert checkpoint.read_offsets(tmp_path / HIGH_WATERMARK_FILE) == {("t", 0): 2}
    assert threads and all(name.startswith("odradek-checkpoint") for name in threads)
    manager.close()  # the final checkpoint, after the background one: the latest offsets win
    assert checkpoint.read_offsets(tmp_path / HIGH_WATERMARK_FILE) == {("t", 0): 3}


def test_delete_partition_removes_its_data(tmp_path, clock):
    manager = LogManager(tmp_path, clock)
    manager.load()
    _fill(manager, "gone", 0, 3)
    _fill(manager, "kept", 0, 1)
    manager.delete_partition("gone", 0)
    assert manager.get("gone", 0) is None
    assert not any(p.name.startswith("gone-0") for p in tmp_path.iterdir())
    (tmp_path / "gone-1.0123456789abcdef-delete").mkdir()  # an interrupted delete
    manager.close()
    again = LogManager(tmp_path, clock)
    again.load()
    assert [tp for tp, _ in again] == [("kept", 0)]
    assert not (tmp_path / "gone-1.0123456789abcdef-delete").exists()
    again.close()


def test_configs_resolve_overrides_over_broker_defaults(tmp_path, clock):
    manager = LogManager(tmp_path, clock, {"retention.ms": 1000, "segment.bytes": 5000})
    manager.load()
    plog = manager.get_or_create("t", 0, {"segment.bytes": "7000"})
    assert plog.config.segment_bytes == 7000 and plog.config.retention_ms == 1000
    manager.update_config("t", {"cleanup.policy": "compact"})
    assert plog.config.compact and plog.config.segment_bytes == 5000
    assert isinstance(plog.config, LogConfig)
    manager.close()


def _compacted_partition(manager):
    plog = manager.get_or_create(
        "__consumer_offsets", 0,
        {"cleanup.policy": "compact", "segment.bytes": "600", "min.cleanable.dirty.ratio": "0.1"},
    )
    for r in range(8):
        for k in range(3):
            buf, headers = batch(values=[(f"group{k}".encode(), f"offset{r}".encode() * 5)])
            plog.append_as_leader(buf, headers, 0, T0)
    plog.high_watermark = plog.log_end_offset
    return plog


def test_tick_compacts_compacted_topics_inline(tmp_path, clock):
    manager = LogManager(tmp_path, clock, background_cleaning=False)
    manager.load()
    plog = _compacted_partition(manager)
    before = len(read_all(plog))
    manager.tick(clock.now_ms())
    after = read_all(plog)
    assert len(after) < before
    assert {k: v for _, k, v in after} == {f"group{k}".encode(): b"offset7" * 5 for k in range(3)}
    manager.close()


def test_tick_compacts_on_the_cleaner_thread(tmp_path, clock):
    manager = LogManager(tmp_path, clock)
    manager.load()
    plog = _compacted_partition(manager)
    before = len(read_all(plog))
    manager.tick(clock.now_ms())
    manager.wait_for_cleaner(timeout_s=30)
    assert len(read_all(plog)) < before
    manager.close()


def test_rolled_segments_are_fsynced_on_the_flusher_thread(tmp_path, clock):
    manager = LogManager(tmp_path, clock)
    manager.load()
    plog = manager.get_or_create("t", 0, {"segment.bytes": "400"})
    for _ in range(12):
        buf, headers = batch(1, value=b"p" * 80)
        plog.append_as_leader(buf, headers, 0, T0)
    assert plog.recovery_point == 0 and plog.has_rolled_unflushed
    manager.tick(clock.now_ms())
    manager.wait_for_cleaner(timeout_s=30)
    assert not plog.has_rolled_unflushed
    assert plog.recovery_point == plog.segments[-1].base_offset > 0
    manager.close()


def test_compaction_checks_back_off_between_ticks(tmp_path, clock):
    manager = LogManager(tmp_path, clock, background_cleaning=False, cleaner_backoff_ms=15_000)
    manager.load()
    plog = manager.get_or_create("c", 0, {"cleanup.policy": "compact", "segment.bytes": "600",
                                          "min.cleanable.dirty.ratio": "0.1"})
    manager.tick(clock.now_ms())  # first look: nothing to clean yet
    for r in range(8):
        buf, headers = batch(values=[(b"k", f"v{r}".encode() * 20)])
        plog.append_as_leader(buf, headers, 0, T0)
    plog.high_watermark = plog.log_end_offset
    before = len(read_all(plog))
    manager.tick(clock.now_ms())
    assert len(read_all(plog)) == before  # within the backoff
    clock.advance(15_000)
    manager.tick(clock.now_ms())
    assert len(read_all(plog)) < before
    manager.close()


def test_a_clean_stop_rewrites_only_dirty_logs(tmp_path, clock):
    """Closing thousands of logs must not touch idle ones: a log with nothing appended since its last load keeps
    its files as they are, and no log gets a file of its own for its producer state (it goes in the directory's
    one producer-state file, rewritten whole)."""
    manager = LogManager(tmp_path, clock)
    manager.load()
    _fill(manager, "idle", 0, 2, producer_id=7)
    _fill(manager, "busy", 0, 2, producer_id=8)
    manager.close()
    idle_files = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "idle-0").iterdir()}

    again = LogManager(tmp_path, clock)
    again.load()
    busy = again.get("busy", 0)
    assert busy is not None
    buf, headers = batch(1, producer_id=8, producer_epoch=0, base_sequence=2)
    busy.append_as_leader(buf, headers, 0, T0)
    again.close()
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "idle-0").iterdir()} == idle_files
    assert producer_state.list_snapshots(tmp_path / "busy-0") == []
    states = producer_state.read_stop_states(tmp_path)
    assert states is not None and sorted(states) == [("busy", 0), ("idle", 0)]
    assert producer_state.ProducerStateManager.from_json(states[("busy", 0)])[1] == 3
    assert checkpoint.read_offsets(tmp_path / RECOVERY_POINT_FILE) == {("busy", 0): 3, ("idle", 0): 2}
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_a_clean_stop_syncs_each_directory_once_instead_of_every_file(tmp_path, clock, monkeypatch):
    """The closes defer their fsyncs to one filesystem barrier (syncfs) per log directory, written before the
    checkpoints and the marker that promise durability."""
    manager = LogManager(tmp_path, clock)
    manager.load()
    for partition in range(4):
        _fill(manager, "orders", partition, 3)
    calls: list[str] = []
    real_fsync, real_sync = os.fsync, durability.sync_filesystem
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(durability, "sync_filesystem", lambda d: (calls.append(f"syncfs {d}"), real_sync(d))[1])
    manager.close()
    barrier = calls.index(f"syncfs {tmp_path}")
    # Before the barrier: no per-file fsync (four logs' segments, indexes and snapshots would be a dozen);
    # after it: the broker-level checkpoints and the marker, each written atomically with its own fsyncs.
    assert "fsync" not in calls[:barrier]
    assert calls.count(f"syncfs {tmp_path}") == 1
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    again = LogManager(tmp_path, clock)
    again.load()
    assert [again.get("orders", p).log_end_offset for p in range(4)] == [3, 3, 3, 3]
    again.close()


def test_a_failed_barrier_leaves_no_clean_marker(tmp_path, clock, monkeypatch, caplog):
    manager = LogManager(tmp_path, clock)
    manager.load()
    _fill(manager, "orders", 0, 3)

    def failing(directory):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(durability, "sync_filesystem", failing)
    manager.close()
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert "syncing log directory" in caplog.text
    monkeypatch.undo()
    again = LogManager(tmp_path, clock)
    again.load()  # recovers the log from its files, as after a crash
    assert again.get("orders", 0).log_end_offset == 3
    again.close()


def _count_replays(monkeypatch):
    from odradek.broker.log import loader
    replayed: list[str] = []
    real = loader._headers_from
    monkeypatch.setattr(loader, "_headers_from", lambda segments, offset: (
        replayed.append(segments[0].log_path.parent.name), real(segments, offset))[1])
    return replayed


def test_a_clean_stop_keeps_producer_state_in_one_file_per_directory(tmp_path, clock, monkeypatch):
    """One file per directory instead of a snapshot file per log (file creation was most of a clean stop's time):
    a log missing from it had no producer state. The next clean load takes each log's state from it without
    replaying the log, and removes it, so that a later crash replays instead of trusting it."""
    manager = LogManager(tmp_path, clock)
    manager.load()
    # records past index.interval.bytes, so that the segments have index entries and load without recovery
    _fill(manager, "plain", 0, 3, value=b"x" * 5000)
    _fill(manager, "idem", 0, 3, producer_id=5, value=b"x" * 5000)
    manager.close()
    assert producer_state.list_snapshots(tmp_path / "plain-0") == []
    assert producer_state.list_snapshots(tmp_path / "idem-0") == []
    states = producer_state.read_stop_states(tmp_path)
    assert states is not None and list(states) == [("idem", 0)]

    replayed = _count_replays(monkeypatch)
    again = LogManager(tmp_path, clock)
    again.load()
    assert replayed == [], "a clean load takes the producer state of the stop without replaying anything"
    assert producer_state.read_stop_states(tmp_path) is None, "removed once loaded"
    plain, idem = again.get("plain", 0), again.get("idem", 0)
    assert plain is not None and idem is not None
    assert list(plain.producer_state.entries()) == []
    assert [e.producer_id for e in idem.producer_state.entries()] == [5]
    # the idempotent producer is still known: its retry is a duplicate, not a new write
    buf, headers = batch(1, producer_id=5, producer_epoch=0, base_sequence=2, value=b"x" * 5000)
    assert idem.append_as_leader(buf, headers, 0, T0).first_offset == 2
    again.abandon()  # a crash: no marker, and no producer-state file of a stop

    third = LogManager(tmp_path, clock)
    third.load()
    assert sorted(replayed) == ["idem-0", "plain-0"], "after a crash the logs are replayed"
    idem = third.get("idem", 0)
    assert idem is not None and [e.last_sequence for e in idem.producer_state.entries()] == [2]
    third.close()


def test_an_unreadable_producer_state_file_recovers_the_directory(tmp_path, clock):
    manager = LogManager(tmp_path, clock)
    manager.load()
    _fill(manager, "idem", 0, 3, producer_id=5)
    manager.close()
    (tmp_path / producer_state.STOP_STATES_FILE).write_text("1\n1\nidem 0 {not json\n")
    again = LogManager(tmp_path, clock)
    again.load()
    idem = again.get("idem", 0)
    assert idem is not None and [e.last_sequence for e in idem.producer_state.entries()] == [2]
    (tmp_path / producer_state.STOP_STATES_FILE).write_text("garbage")
    again.close()
    assert producer_state.read_stop_states(tmp_path) is not None, "the stop writes it again, whole"


def test_a_directory_stopped_by_an_older_odradek_loads_its_snapshot_files(tmp_path, clock, monkeypatch):
    """Before the one file per directory, a clean stop wrote a snapshot file per log: such a directory has no
    producer-state file; a log's snapshot at its end is loaded, and a log without any had an empty state
    (Kafka's rule for a clean shutdown without a snapshot)."""
    manager = LogManager(tmp_path, clock)
    manager.load()
    idem = _fill(manager, "idem", 0, 3, producer_id=5, value=b"x" * 5000)
    _fill(manager, "plain", 0, 3, value=b"x" * 5000)
    state = idem.producer_state
    manager.close()
    (tmp_path / producer_state.STOP_STATES_FILE).unlink()
    producer_state.write_snapshot(tmp_path / "idem-0", state, 3)

    replayed = _count_replays(monkeypatch)
    again = LogManager(tmp_path, clock)
    again.load()
    assert "plain-0" not in replayed  # (idem-0 is read from its snapshot's offset, its end: nothing)
    idem, plain = again.get("idem", 0), again.get("plain", 0)
    assert idem is not None and plain is not None
    assert [e.last_sequence for e in idem.producer_state.entries()] == [2]
    assert list(plain.producer_state.entries()) == []
    again.close()


def test_idempotent_producer_state_survives_clean_stops_with_a_plain_log_between(tmp_path, clock):
    """A log whose producers arrive after a snapshot-less clean stop snapshots them at the next one."""
    manager = LogManager(tmp_path, clock)
    manager.load()
    _fill(manager, "t", 0, 2)
    manager.close()
    again = LogManager(tmp_path, clock)
    again.load()
    _fill(again, "t", 0, 2, producer_id=9)
    again.close()
    third = LogManager(tmp_path, clock)
    third.load()
    plog = third.get("t", 0)
    assert plog is not None
    assert [(e.producer_id, e.last_sequence) for e in plog.producer_state.entries()] == [(9, 3)]
    third.close()


def test_a_new_logs_first_epoch_checkpoint_is_written_in_the_background(tmp_path, clock):
    """A new leadership of a new log writes its leader-epoch checkpoint from the manager's background work, not
    at the clean stop; written without an fsync, it is synced before the recovery point passes its epoch."""
    manager = LogManager(tmp_path, clock)
    manager.load()
    plog = manager.get_or_create("t", 0, {})
    plog.assign_epoch(3, 0)
    path = tmp_path / "t-0" / "leader-epoch-checkpoint"
    assert not path.exists()
    assert plog.new_epoch_checkpoint_pending
    clock.advance(2_000)
    manager.tick(clock.now_ms())
    manager.wait_for_cleaner()
    assert path.read_text() == "0\n1\n3 0\n"
    assert not plog.new_epoch_checkpoint_pending
    synced: list[str] = []
    real = checkpoint.sync_file
    import odradek.broker.log.epoch_cache as epoch_cache
    orig = epoch_cache.checkpoint.sync_file
    epoch_cache.checkpoint.sync_file = lambda p: (synced.append(p.name), real(p))[1]
    try:
        buf, headers = batch(1)
        plog.append_as_leader(buf, headers, 3, T0)
        plog.flush()
    finally:
        epoch_cache.checkpoint.sync_file = orig
    assert synced == ["leader-epoch-checkpoint"]
    manager.close()


def test_a_torn_epoch_checkpoint_recovers_the_epochs_from_the_batches(tmp_path, clock):
    """A checkpoint written without an fsync can be empty after a crash: the log recovers every segment and
    assigns the epochs again from its batches, instead of failing to load."""
    manager = LogManager(tmp_path, clock)
    manager.load()
    plog = manager.get_or_create("t", 0, {})
    for epoch in (1, 1, 4):
        buf, headers = batch(1)
        plog.append_as_leader(buf, headers, epoch, T0)
    manager.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("")
    again = LogManager(tmp_path, clock)
    again.load()
    reopened = again.get("t", 0)
    assert reopened is not None
    assert reopened.epoch_entries == [(1, 0), (4, 2)]
    assert reopened.end_offset_for_epoch(1) == (1, 2)
    again.close()
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n4 2\n"


def test_a_checkpoint_file_whose_content_did_not_change_is_not_written_again(tmp_path, clock):
    manager = LogManager(tmp_path, clock, broker_id=1, cluster_id="abc")
    manager.load()
    try:
        plog = _fill(manager, "orders", 0, 2)
        manager.checkpoint()
        inodes = {name: (tmp_path / name).stat().st_ino
                  for name in (RECOVERY_POINT_FILE, LOG_START_FILE, HIGH_WATERMARK_FILE)}
        manager.checkpoint()  # nothing moved: every file stays the one written before (each write replaces it)
        assert {name: (tmp_path / name).stat().st_ino for name in inodes} == inodes
        plog.append_as_leader(*batch(1), 0, T0)
        plog.high_watermark = plog.log_end_offset
        manager.checkpoint()  # only the high watermark moved
        assert (tmp_path / HIGH_WATERMARK_FILE).stat().st_ino != inodes[HIGH_WATERMARK_FILE]
        assert (tmp_path / LOG_START_FILE).stat().st_ino == inodes[LOG_START_FILE]
        assert checkpoint.read_offsets(tmp_path / HIGH_WATERMARK_FILE) == {("orders", 0): 3}
    finally:
        manager.close()


def test_a_flush_ms_fsync_runs_on_the_flusher_thread_and_the_tick_does_not_wait_for_it(tmp_path, clock, monkeypatch):
    """The tick (on the broker's event loop) hands flush.ms fsyncs to the flusher thread: with the segment's fsync
    hanging (a disk that does not answer), the tick returns, and the recovery point moves once the disk answers."""
    manager = LogManager(tmp_path, clock)
    manager.load()
    try:
        plog = manager.get_or_create("slow", 0, {"flush.ms": "1000"})
        manager.tick(clock.now_ms())  # the new directory synced, the log's first flush done
        manager.wait_for_cleaner(60)
        for _ in range(3):
            buf, headers = batch(1)
            plog.append_as_leader(buf, headers, 0, T0)
        segment_inode = os.stat(plog.segments[-1].log_path).st_ino
        started, answers, done = threading.Event(), threading.Event(), threading.Event()
        threads: list[str] = []
        plain_fsync = durability.fsync

        def slow_fsync(fd: int) -> None:
            if os.fstat(fd).st_ino == segment_inode and not done.is_set():
                threads.append(threading.current_thread().name)
                started.set()
                answers.wait(30)  # bounded: with the fsync on the ticking thread the test fails, not hangs
                plain_fsync(fd)
                done.set()
                return
            plain_fsync(fd)

        monkeypatch.setattr(durability, "fsync", slow_fsync)
        clock.advance(1001)
        manager.tick(clock.now_ms())
        assert started.wait(60), "the flush.ms fsync began"
        assert not done.is_set(), "the tick returned while the fsync still waited for the disk"
        assert plog.recovery_point == 0
        answers.set()
        manager.wait_for_cleaner(60)
        assert done.is_set() and plog.recovery_point == 3
        assert threads == [threads[0]] and threads[0].startswith("odradek-log-flusher")
    finally:
        manager.close()
