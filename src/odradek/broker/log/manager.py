"""All partition logs of one broker's log directories, and the checkpoint files beside them.

A broker may have several log directories (Kafka's ``log.dirs``, JBOD): each holds its own partitions, its own
checkpoints and ``meta.properties``; a new partition goes to the online directory holding the fewest partitions
(Kafka's ``nextLogDirs`` rule). With more than one directory a disk error in any partition takes its whole
directory offline (Kafka's LogDirFailureChannel): every partition there stops being served, the others carry on, and
the listeners in ``on_dir_failure`` are told so the broker can tell the controller. With a single directory a disk
error stays confined to its partition, as odradek always did.

The layout is Kafka's, so an operator finds what they expect: ``<topic>-<partition>/`` directories,
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` (high
watermarks), ``meta.properties`` and, after a clean shutdown, ``.kafka_cleanshutdown``. The marker is what
lets the next start skip CRC-checking everything after the recovery point; it is removed as soon as loading is
done, so a crash later is recognised as unclean.
"""

from __future__ import annotations

import concurrent.futures
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.broker.log import checkpoint, durability, producer_state
from odradek.broker.log.cleaner import LogCleaner
from odradek.broker.log.mover import FUTURE_SUFFIX, Move, future_dir, lag_of, run_move
from odradek.broker.log.partition_log import PartitionLog, parse_partition_dir, partition_dir_name
from odradek.broker.topic_config import ConfigValue, LogConfig
from odradek.clock import Clock
from odradek.errors import ErrorCode, KafkaError
from odradek.placement.model import TopicPartition

log = logging.getLogger("odradek.log")

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CLOSE_THREADS = 8  # concurrent log closes on a clean stop
META_PROPERTIES = "meta.properties"
DELETE_SUFFIX = "-delete"
CLEANER_BACKOFF_MS = 15_000  # Kafka's log.cleaner.backoff.ms: how often a compacted log is looked at
CHECKPOINT_INTERVAL_MS = 5_000  # Kafka checkpoints high watermarks every 5 s (replica.high.watermark...ms)
# Every partition is looked at (flush.ms, rolled segments, retention, compaction) at most this often, and less often
# when a sweep is costly: a broker with tens of thousands of partitions spends at most 1/SWEEP_COST_SHARE of its
# time sweeping instead of starving its event loop.
SWEEP_INTERVAL_MS = 1_000
SWEEP_COST_SHARE = 20



@dataclass(frozen=True)
class LogDirState:
    """One log directory as DescribeLogDirs shows it: offline ones carry no partitions and -1 for the sizes."""

    path: Path
    online: bool
    partition_sizes: dict[TopicPartition, int]
    # partitions on their way into this directory: (size, how far behind the current log)
    futures: dict[TopicPartition, tuple[int, int]]
    total_bytes: int
    usable_bytes: int


class LogManager:
    def __init__(
        self,
        data_dir: Path | str | Sequence[Path | str],
        clock: Clock,
        defaults: Mapping[str, ConfigValue] | None = None,
        *,
        broker_id: int | None = None,
        cluster_id: str | None = None,
        checkpoint_interval_ms: int = CHECKPOINT_INTERVAL_MS,
        retention_check_interval_ms: int = 0,
        background_cleaning: bool = True,
        cleaner_backoff_ms: int = CLEANER_BACKOFF_MS,
    ) -> None:
        """``defaults`` are the broker's topic-config defaults keyed by topic-config name
        (``retention.ms``...), as :func:`odradek.broker.topic_config.broker_defaults_from_properties` produces
        them. ``retention_check_interval_ms`` is Kafka's ``log.retention.check.interval.ms``: how often retention
        and producer-id expiry look at every log (0: on every sweep, as tests with a manual clock want)."""
        given = [data_dir] if isinstance(data_dir, (str, Path)) else list(data_dir)
        dirs = [Path(d).absolute() for d in given]
        if not dirs:
            raise ValueError("at least one log directory is needed")
        if len({d.resolve() for d in dirs}) != len(dirs):
            raise ValueError(f"duplicate log directories in {[str(d) for d in dirs]}")
        self.log_dirs: list[Path] = dirs
        self.data_dir = dirs[0]
        self.offline_dirs: set[Path] = set()
        # called with the failed directory, on whichever thread noticed the failure
        self.on_dir_failure: list[Callable[[Path], None]] = []
        self._new_dir_parents: set[Path] = set()
        # called as (partition, new log) when a move between directories swaps a reopened log in
        self.on_log_replaced: list[Callable[[TopicPartition, PartitionLog], None]] = []
        self._moves: dict[TopicPartition, Move] = {}
        self._mover_pool = concurrent.futures.ThreadPoolExecutor(len(dirs), thread_name_prefix="odradek-log-mover")
        self.clock = clock
        self.defaults: dict[str, ConfigValue] = dict(defaults or {})
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._written: dict[tuple[Path, str], dict[TopicPartition, int]] = {}
        """Each checkpoint file's content as last written: an unchanged one is not written again."""
        self._last_sweep_ms: int | None = None
        self._new_dirs = False
        self.retention_check_interval_ms = retention_check_interval_ms
        self._last_retention_ms: int | None = None
        self._sweep_interval_ms = SWEEP_INTERVAL_MS
        self._logs: dict[TopicPartition, PartitionLog] = {}
        # Logs per directory for next_log_dir: counted once, then kept up to date by creations; anything else that
        # changes where logs are (load, a move, a deletion, a failed directory) drops it to be counted again.
        self._dir_counts: dict[Path, int] | None = None
        self._overrides: dict[str, dict[str, object]] = {}
        self._cleaner = LogCleaner(clock)
        # Compaction decodes whole segments in Python: it runs on one worker thread (Kafka's cleaner thread) so
        # the event loop keeps serving; tests pass background_cleaning=False to run it inline and deterministic.
        self._cleaner_pool = (
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="odradek-log-cleaner")
            if background_cleaning
            else None
        )
        self._cleaning: dict[TopicPartition, concurrent.futures.Future[None]] = {}
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self._last_clean_check: dict[TopicPartition, int] = {}
        # fsyncs of rolled segments likewise run on their own thread, never delayed behind a compaction.
        self._flusher_pool = (
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="odradek-log-flusher")
            if background_cleaning
            else None
        )
        self._flushing: dict[TopicPartition, concurrent.futures.Future[None]] = {}
        self._epoch_writing: concurrent.futures.Future[None] | None = None
        self._ticking: concurrent.futures.Future[None] | None = None
        """The flusher thread's round of flush.ms fsyncs and retention (see :meth:`_sweep`)."""
        self._retention_pending = False
        """A retention round found the previous round still running: the next sweep applies retention."""
        self._closing = threading.Event()  # a stop's close threads take over what background work has left
        # Checkpoints are six fsyncs per directory: written on a thread of their own (Kafka's scheduler thread),
        # they no longer stall the event loop, and every request waiting on it, for tens of milliseconds every
        # few seconds (bench/RESULTS.md, issue 11). The offsets are read on the caller's thread.
        self._checkpoint_pool = (
            concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="odradek-checkpoint")
            if background_cleaning
            else None
        )
        self._checkpointing: concurrent.futures.Future[list[tuple[Path, OSError]]] | None = None
        self._last_checkpoint_ms = clock.now_ms()
        self._loaded = False

    # --- start-up
    # ---------------------------------------------------------------------------------------------

    def load(self, topic_overrides: Mapping[str, Mapping[str, object]] | None = None) -> None:
        """Open and recover every partition directory of every log directory. Overrides known at start (topic →
        config overrides) are applied before recovery; others can follow through :meth:`get_or_create` or
        :meth:`update_config`. A directory that cannot be read at all starts offline (with several directories);
        the same partition in two directories is refused, as Kafka refuses it."""
        self._dir_counts = None
        for topic, overrides in (topic_overrides or {}).items():
            self._overrides[topic] = dict(overrides)
        unclean = 0
        for directory in self.log_dirs:
            try:
                unclean += self._load_dir(directory)
            except OSError as exc:
                if len(self.log_dirs) == 1:
                    raise
                log.error("log directory %s cannot be loaded, it is offline: %s", directory, exc)
                self.offline_dirs.add(directory)
        if len(self.offline_dirs) == len(self.log_dirs):
            raise KafkaError(ErrorCode.kafka_storage_error, "every log directory is offline")
        self._loaded = True
        if self._logs:
            log.info("loaded %d partition logs from %s (%d directories after an unclean shutdown)", len(self._logs),
                     ", ".join(str(d) for d in self.log_dirs), unclean)

    def _load_dir(self, directory: Path) -> int:
        """Load one log directory; 1 when its last shutdown was unclean."""
        directory.mkdir(parents=True, exist_ok=True)
        self._write_meta_properties(directory)
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery, log_start, high_watermarks = self._read_checkpoints(directory)
        if not recovery and clean:
            clean = False  # a clean marker without checkpoints cannot be trusted
        states_at_stop: dict[tuple[str, int], str] | None = None
        if clean:
            try:
                states_at_stop = producer_state.read_stop_states(directory)
            except (ValueError, OSError) as exc:
                log.warning("the producer state of the last stop in %s does not read (%s): recovering its logs as "
                            "after a crash", directory, exc)
                clean = False
        for path in sorted(directory.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(DELETE_SUFFIX) or path.name.endswith(FUTURE_SUFFIX):
                # an interrupted delete is finished; an interrupted move is dropped (the current log is intact)
                shutil.rmtree(path, ignore_errors=True)
                continue
            parsed = parse_partition_dir(path.name)
            if parsed is None:
                continue
            existing = self._logs.get(parsed)
            if existing is not None:
                raise ValueError(f"duplicate log directories for {parsed[0]}-{parsed[1]}: "
                                 f"{existing.directory} and {path}")
            self._logs[parsed] = PartitionLog.open(
                path,
                self._config_for(parsed[0]),
                self.clock,
                recovery_point=recovery.get(parsed, 0),
                log_start_offset=log_start.get(parsed, 0),
                high_watermark=high_watermarks.get(parsed, 0),
                clean_shutdown=clean and parsed in recovery,
                stop_states_read=states_at_stop is not None,
                state_at_stop=states_at_stop.get(parsed) if states_at_stop is not None else None,
            )
        marker.unlink(missing_ok=True)
        # trusted only right after the stop that wrote it: a later crash must not find it
        (directory / producer_state.STOP_STATES_FILE).unlink(missing_ok=True)
        checkpoint.fsync_dir(directory)
        return 0 if clean else 1

    def _read_checkpoints(self, directory: Path) -> tuple[dict[TopicPartition, int], ...]:
        out: list[dict[TopicPartition, int]] = []
        for name in (RECOVERY_POINT_FILE, LOG_START_FILE, HIGH_WATERMARK_FILE):
            try:
                out.append(checkpoint.read_offsets(directory / name))
            except (ValueError, OSError) as exc:
                log.warning("ignoring unreadable checkpoint %s in %s: %s", name, directory, exc)
                out.append({})
        return tuple(out)

    def _write_meta_properties(self, directory: Path) -> None:
        if self.broker_id is None:
            return
        path = directory / META_PROPERTIES
        if path.exists():
            return
        lines = ["version=0", f"broker.id={self.broker_id}"]
        if self.cluster_id:
            lines.append(f"cluster.id={self.cluster_id}")
        checkpoint.write_atomically(path, "\n".join(lines) + "\n")

    # --- partitions
    # -------------------------------------------------------------------------------------------

    def _config_for(self, topic: str) -> LogConfig:
        return LogConfig.build(self._overrides.get(topic, {}), self.defaults)

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create(
        self, topic: str, partition: int, config: LogConfig | Mapping[str, object] | None = None,
        *, is_new: bool = True,
    ) -> PartitionLog:
        """The partition's log, created empty if absent. ``config`` may be a LogConfig or the topic's override
        strings (then resolved against the broker defaults); either way the log adopts it. A log the controller
        says should exist (``is_new`` False) is not created afresh while a log directory is offline: it may be
        there (Kafka's KafkaStorageException in getOrCreateLog)."""
        if config is not None and not isinstance(config, LogConfig):
            self._overrides[topic] = dict(config)
            resolved = self._config_for(topic)
        else:
            resolved = config or self._config_for(topic)
        existing = self._logs.get(TopicPartition(topic, partition))
        if existing is not None:
            if existing.config != resolved:
                existing.update_config(resolved)
            return existing
        if not is_new and self.offline_dirs:
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot create a log for {topic}-{partition}: "
                             f"log directories {sorted(map(str, self.offline_dirs))} are offline")
        parent = self.next_log_dir()
        try:
            plog = PartitionLog.open(parent / partition_dir_name(topic, partition), resolved, self.clock)
        except OSError as exc:
            self.fail_dir(parent, exc)
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot create a log in {parent}: {exc}") from exc
        self._logs[TopicPartition(topic, partition)] = plog
        if self._dir_counts is not None:
            self._dir_counts[parent] = self._dir_counts.get(parent, 0) + 1
        self._new_dir_parents.add(parent)
        # The new directory's entry reaches the disk with one fsync of the data directory for a whole batch
        # (sync_new_dirs, called after each LeaderAndIsr and by tick), not one per partition: with 10,000
        # directories each fsync took milliseconds and a 10,000-partition LeaderAndIsr stalled the event loop for
        # seconds. Losing a new, empty log's directory in a crash loses no data; the controller recreates it.
        self._new_dirs = True
        return plog

    def sync_new_dirs(self) -> None:
        """Make the directories of logs created since the last call durable."""
        if self._new_dirs:
            self._new_dirs = False
            parents, self._new_dir_parents = self._new_dir_parents, set()
            for parent in parents:
                if parent in self.offline_dirs:
                    continue
                try:
                    checkpoint.fsync_dir(parent)
                except OSError as exc:
                    self.fail_dir(parent, exc)

    # --- log directories
    # --------------------------------------------------------------------------------------

    def next_log_dir(self) -> Path:
        """Where a new partition goes: the online directory holding the fewest partitions, the first listed on a
        tie (Kafka's ``nextLogDirs``)."""
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise KafkaError(ErrorCode.kafka_storage_error, "no log directory is online")
        if len(online) == 1:
            return online[0]
        counts = self._dir_counts
        if counts is None:
            # A count per creation made creating 10,000 partitions quadratic (seconds per thousand at the end).
            counts = self._dir_counts = dict.fromkeys(self.log_dirs, 0)
            for plog in self._logs.values():
                parent = plog.directory.parent
                if parent in counts:
                    counts[parent] += 1
        return min(online, key=lambda d: counts.get(d, 0))

    def log_dir_of(self, plog: PartitionLog) -> Path:
        return plog.directory.parent

    def logs_in(self, directory: Path) -> dict[TopicPartition, PartitionLog]:
        return {tp: p for tp, p in self._logs.items() if p.directory.parent == directory}

    def fail_dir(self, directory: Path, cause: BaseException | str) -> None:
        """Take a whole log directory offline (several directories only): its logs refuse every read and write
        from now on, its checkpoints stop, and the listeners hear of it. Idempotent."""
        if len(self.log_dirs) == 1 or directory in self.offline_dirs:
            return
        self.offline_dirs.add(directory)
        for plog in self.logs_in(directory).values():
            plog.detach()  # offline at once for every reader; a failed disk gets no further writes
        log.error("log directory %s is offline after a disk error: %s (%d of %d directories left)",
                  directory, cause, len(self.log_dirs) - len(self.offline_dirs), len(self.log_dirs))
        for listener in list(self.on_dir_failure):
            listener(directory)

    def _propagate_failures(self) -> None:
        """A log that took itself offline after an OSError takes its directory with it (several directories)."""
        if len(self.log_dirs) == 1:
            return
        for plog in list(self._logs.values()):
            parent = plog.directory.parent
            if plog.offline and parent not in self.offline_dirs:
                self.fail_dir(parent, f"partition {plog.directory.name} failed")

    def describe(self) -> list[LogDirState]:
        """Every log directory as DescribeLogDirs reports it."""
        out = []
        for directory in self.log_dirs:
            if directory in self.offline_dirs:
                out.append(LogDirState(directory, False, {}, {}, -1, -1))
                continue
            try:
                usage = shutil.disk_usage(directory)
                total, usable = usage.total, usage.free
            except OSError:
                total = usable = -1
            sizes = {tp: plog.size_in_bytes for tp, plog in self.logs_in(directory).items()}
            futures = {}
            for tp, move in list(self._moves.items()):
                current, future = self._logs.get(tp), move.future
                if move.destination == directory and future is not None and current is not None \
                        and not move.done.is_set():
                    futures[tp] = (future.size_in_bytes, lag_of(current, future))
            out.append(LogDirState(directory, True, sizes, futures, total, usable))
        return out

    # --- moves between log directories (AlterReplicaLogDirs)
    # ------------------------------------------------------------------

    def resolve_log_dir(self, path: str) -> Path | None:
        """The configured log directory ``path`` names (as given or absolute), None when it is none of them."""
        wanted = Path(path)
        for directory in self.log_dirs:
            if directory == wanted or directory.resolve() == wanted.resolve():
                return directory
        return None

    def alter_log_dir(self, topic: str, partition: int, path: str) -> ErrorCode:
        """Start moving a hosted replica to the log directory ``path``; the copy runs on a mover thread.
        LOG_DIR_NOT_FOUND for a directory that is not configured, KAFKA_STORAGE_ERROR for an offline one (or an
        offline replica), REPLICA_NOT_AVAILABLE for a replica this broker does not host."""
        destination = self.resolve_log_dir(path)
        if destination is None:
            return ErrorCode.log_dir_not_found
        if destination in self.offline_dirs:
            return ErrorCode.kafka_storage_error
        tp = TopicPartition(topic, partition)
        current = self._logs.get(tp)
        if current is None:
            return ErrorCode.replica_not_available
        if current.offline:
            return ErrorCode.kafka_storage_error
        running = self._moves.get(tp)
        if running is not None and not running.done.is_set():
            if running.destination == destination:
                return ErrorCode.none
            running.cancelled.set()  # a new destination replaces the old move, as Kafka does
            running.done.wait()
        if current.directory.parent == destination:
            return ErrorCode.none
        move = Move(tp, destination)
        try:
            move.future = PartitionLog.open(future_dir(destination, tp), current.config, self.clock,
                                       log_start_offset=current.log_start_offset)
            move.future.truncate_fully_and_start_at(current.log_start_offset)
        except (OSError, KafkaError) as exc:
            self.fail_dir(destination, exc)
            return ErrorCode.kafka_storage_error
        self._moves[tp] = move
        self._mover_pool.submit(run_move, move, lambda: self._logs.get(tp), self._swap)
        log.info("moving %s-%d from %s to %s", topic, partition, current.directory.parent, destination)
        return ErrorCode.none

    def _swap(self, old: PartitionLog, new: PartitionLog) -> None:
        tp = TopicPartition(new.topic, new.partition)
        if self._logs.get(tp) is old:
            self._logs[tp] = new
            self._dir_counts = None
        for listener in list(self.on_log_replaced):
            listener(tp, new)

    def wait_for_moves(self, timeout_s: float | None = None) -> bool:
        """Block until every started move has finished (tests, shutdown); False on timeout."""
        return all(m.done.wait(timeout_s) for m in list(self._moves.values()))

    def _stop_moves(self) -> None:
        for move in self._moves.values():
            move.cancelled.set()
        self._mover_pool.shutdown(wait=True, cancel_futures=True)
        for move in self._moves.values():
            if not move.done.is_set() and move.future is not None:  # never started: nothing to wait for
                move.future.detach()
        self._moves.clear()

    def update_config(self, topic: str, overrides: Mapping[str, object]) -> LogConfig:
        """New topic overrides (IncrementalAlterConfigs): validated, then applied to every partition's log."""
        self._overrides[topic] = dict(overrides)
        config = self._config_for(topic)
        for (t, _), plog in self._logs.items():
            if t == topic:
                plog.update_config(config)
        return config

    def update_defaults(self, defaults: Mapping[str, ConfigValue]) -> None:
        """New broker-level topic defaults (a dynamic broker config changed): every log whose topic does not
        override a changed name adopts it, as Kafka's DynamicLogConfig.reconfigure updates each log's config."""
        self.defaults = dict(defaults)
        for (topic, _), plog in self._logs.items():
            config = self._config_for(topic)
            if plog.config != config:
                plog.update_config(config)

    def delete_partition(self, topic: str, partition: int) -> None:
        """Rename to ``<topic>-<partition>.<uuid>-delete`` (atomic: the log is gone for every reader at once),
        then remove the files. A crash in between is finished by the next :meth:`load`."""
        plog = self._logs.pop(TopicPartition(topic, partition), None)
        if plog is not None:
            self._dir_counts = None
            plog.detach()
            directory = plog.directory
        else:
            found = [d / partition_dir_name(topic, partition) for d in self.log_dirs if d not in self.offline_dirs]
            directory = next((d for d in found if d.exists()), found[0] if found else self.data_dir)
        if not directory.exists():
            return
        doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        try:
            directory.rename(doomed)
            checkpoint.fsync_dir(directory.parent)
        except OSError as exc:
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot delete {directory}: {exc}") from exc
        shutil.rmtree(doomed, ignore_errors=True)
        log.info("deleted log of partition %s-%d", topic, partition)

    def __iter__(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        return iter(list(self._logs.items()))

    def __len__(self) -> int:
        return len(self._logs)

    # --- background work
    # --------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        """One round of due work: flush.ms, fsync of rolled segments, retention, compaction, checkpoints.

        A failing partition is logged and skipped (it has taken itself offline); the others carry on.
        """
        self.sync_new_dirs()
        self._propagate_failures()
        if self._last_sweep_ms is None or now_ms - self._last_sweep_ms >= self._sweep_interval_ms:
            started = time.perf_counter()
            retention = (self._retention_pending or self._last_retention_ms is None
                         or now_ms - self._last_retention_ms >= self.retention_check_interval_ms)
            if retention:
                self._last_retention_ms = now_ms
            self._sweep(now_ms, retention)
            self._last_sweep_ms = now_ms
            cost_ms = (time.perf_counter() - started) * 1000
            self._sweep_interval_ms = max(SWEEP_INTERVAL_MS, int(cost_ms * SWEEP_COST_SHARE))
        self._collect_checkpoint()
        if now_ms - self._last_checkpoint_ms >= self.checkpoint_interval_ms and self._checkpointing is None:
            if self._checkpoint_pool is None:
                self.checkpoint()
            else:
                self._checkpointing = self._checkpoint_pool.submit(_write_checkpoints, self._checkpoint_offsets())
            self._last_checkpoint_ms = now_ms

    def _collect_checkpoint(self) -> None:
        """The outcome of a background checkpoint that has finished, handled on the caller's thread."""
        if self._checkpointing is None or not self._checkpointing.done():
            return
        done, self._checkpointing = self._checkpointing, None
        self._checkpoint_failed(done.result())

    def _sweep(self, now_ms: int, retention: bool) -> None:
        """Each log's due work. With background threads, the flush.ms fsyncs and retention's deletes run on the
        flusher thread, one round for all due logs, so a slow disk stalls neither the event loop nor the clients
        it serves (only a request for a log being flushed waits, on that log's lock, as it would for an append)."""
        new_epochs: list[PartitionLog] = []
        due: list[PartitionLog] = []
        for tp, plog in list(self._logs.items()):
            topic, partition = tp
            if plog.offline:
                continue
            try:
                if self._flusher_pool is None:
                    plog.tick(now_ms, retention=retention)
                else:
                    if plog.tick_due(now_ms, retention):
                        due.append(plog)
                    self._schedule_flush(tp, plog)
                    if plog.new_epoch_checkpoint_pending:
                        new_epochs.append(plog)
            except KafkaError as exc:
                log.error("background work on %s-%d failed: %s", topic, partition, exc)
            if plog.config.compact:
                self._schedule_cleaning(tp, plog, now_ms)
        if due:
            assert self._flusher_pool is not None
            if self._ticking is None or self._ticking.done():
                # one task for them all, as below
                self._ticking = self._flusher_pool.submit(_tick_logs, due, now_ms, retention, self._closing)
                self._retention_pending = False
            elif retention:
                self._retention_pending = True
        if new_epochs and (self._epoch_writing is None or self._epoch_writing.done()):
            assert self._flusher_pool is not None
            # one task for them all: ten thousand new leaderships would otherwise be ten thousand futures
            self._epoch_writing = self._flusher_pool.submit(_write_new_epoch_checkpoints, new_epochs,
                                                            self._closing)

    def _schedule_cleaning(self, tp: TopicPartition, plog: PartitionLog, now_ms: int) -> None:
        last = self._last_clean_check.get(tp)
        if last is not None and now_ms - last < self.cleaner_backoff_ms:
            return
        self._last_clean_check[tp] = now_ms
        if self._cleaner_pool is None:
            self._clean((tp, plog, now_ms))
            return
        running = self._cleaning.get(tp)
        if running is not None and not running.done():
            return
        self._cleaning[tp] = self._cleaner_pool.submit(self._clean, (tp, plog, now_ms))

    def _schedule_flush(self, tp: TopicPartition, plog: PartitionLog) -> None:
        assert self._flusher_pool is not None
        running = self._flushing.get(tp)
        if (running is not None and not running.done()) or not plog.has_rolled_unflushed:
            return
        self._flushing[tp] = self._flusher_pool.submit(self._flush_rolled, tp, plog)

    @staticmethod
    def _flush_rolled(tp: TopicPartition, plog: PartitionLog) -> None:
        try:
            plog.flush_rolled_segments()
        except KafkaError as exc:
            log.error("flushing rolled segments of %s-%d failed: %s", tp[0], tp[1], exc)
        except Exception:  # a race with truncation; the segments stay pending and are flushed next time
            log.exception("flushing rolled segments of %s-%d failed", tp[0], tp[1])

    def _clean(self, job: tuple[TopicPartition, PartitionLog, int]) -> None:
        (topic, partition), plog, now_ms = job
        try:
            self._cleaner.maybe_clean(plog, now_ms)
        except KafkaError as exc:  # the log took itself offline; it says so in its own log line
            log.error("compaction of %s-%d failed: %s", topic, partition, exc)
        except Exception:
            log.exception("compaction of %s-%d failed", topic, partition)

    def wait_for_cleaner(self, timeout_s: float | None = None) -> None:
        """Block until scheduled compactions and flushes have finished (shutdown and tests)."""
        background = [*self._cleaning.values(), *self._flushing.values()]
        for running in (self._epoch_writing, self._ticking):
            if running is not None:
                background.append(running)
        concurrent.futures.wait(background, timeout=timeout_s)

    def checkpoint(self) -> None:
        """Write the three offset checkpoints of every online log directory (each atomically), after any background
        checkpoint still being written. A directory whose checkpoint fails goes offline (several directories) or
        fails the call (one directory)."""
        if self._checkpointing is not None:
            concurrent.futures.wait([self._checkpointing])
            self._collect_checkpoint()
        self._checkpoint_failed(_write_checkpoints(self._checkpoint_offsets()))

    def _checkpoint_offsets(self) -> list[tuple[Path, dict[str, dict[TopicPartition, int]]]]:
        """Per online directory, the recovery points, log start offsets and high watermarks of its online logs:
        the files whose content changed since they were last written (a broker of 100,000 idle logs would
        otherwise rewrite three 3 MB files every 5 seconds, which costs its event loop and the GIL ~0.5 s)."""
        out = []
        single = len(self.log_dirs) == 1
        for directory in self.log_dirs:
            if directory in self.offline_dirs:
                continue
            recovery: dict[TopicPartition, int] = {}
            start: dict[TopicPartition, int] = {}
            high: dict[TopicPartition, int] = {}
            for tp, p in (self._logs if single else self.logs_in(directory)).items():
                if not p.offline:
                    recovery[tp] = p.recovery_point
                    start[tp] = p.log_start_offset
                    high[tp] = p.high_watermark
            files = {}
            for name, values in ((RECOVERY_POINT_FILE, recovery), (LOG_START_FILE, start),
                                 (HIGH_WATERMARK_FILE, high)):
                if self._written.get((directory, name)) != values:
                    files[name] = values
                    self._written[(directory, name)] = values
            if files:
                out.append((directory, files))
        return out

    def _checkpoint_failed(self, failures: list[tuple[Path, OSError]]) -> None:
        for directory, exc in failures:
            for name in (RECOVERY_POINT_FILE, LOG_START_FILE, HIGH_WATERMARK_FILE):
                self._written.pop((directory, name), None)
            log.error("writing checkpoints in %s failed: %s", directory, exc)
            if len(self.log_dirs) == 1:
                raise KafkaError(ErrorCode.kafka_storage_error, f"checkpoint failed: {exc}") from exc
            if directory not in self.offline_dirs:
                self.fail_dir(directory, exc)

    def wait_for_checkpoint(self) -> None:
        """Block until a background checkpoint has been written and its outcome handled (tests)."""
        if self._checkpointing is not None:
            concurrent.futures.wait([self._checkpointing])
        self._collect_checkpoint()

    def abandon(self) -> None:
        """Stop background work without flushing, closing or checkpointing: what a crash leaves on disk."""
        self._closing.set()
        self._stop_moves()
        for pool in (self._cleaner_pool, self._flusher_pool, self._checkpoint_pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        self._checkpointing = None
        for plog in self._logs.values():
            plog.detach()  # descriptors go as a dead process's would; nothing is written
        self._logs.clear()
        self._dir_counts = None

    def close(self) -> None:
        """Flush every log, checkpoint, and mark the shutdown clean only if every log closed cleanly."""
        self._closing.set()
        self._stop_moves()  # an unfinished move's -future directory is removed by the next load
        for pool in (self._cleaner_pool, self._flusher_pool, self._checkpoint_pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        logs = list(self._logs.items())
        # Logs close in parallel (file I/O releases the GIL) and their fsyncs are deferred to one filesystem
        # barrier per directory (see durability): the marker below promises only that all of it is durable, which
        # the barrier gives for a fraction of the disk's time that tens of thousands of fsyncs would take.
        # one slice of the logs per thread, not one task per log: ten thousand futures cost the stop a second of
        # submitting under the GIL the workers are contending for
        slices = [logs[i::CLOSE_THREADS] for i in range(CLOSE_THREADS)]
        with concurrent.futures.ThreadPoolExecutor(CLOSE_THREADS, thread_name_prefix="log-close") as pool:
            started = time.monotonic()
            closed = list(pool.map(_close_logs, slices))
        clean = all(ok for ok, _ in closed)
        states: dict[Path, dict[tuple[str, int], str]] = {d: {} for d in self.log_dirs}
        for _, produced in closed:
            for tp, text in produced.items():
                states[self._logs[TopicPartition(*tp)].directory.parent][tp] = text
        for directory, entries in states.items():
            if directory in self.offline_dirs:
                continue
            try:
                with durability.deferred():  # the barrier below makes it durable before the marker
                    producer_state.write_stop_states(directory, entries)
            except OSError as exc:
                log.error("clean stop: writing the producer state of the logs in %s failed (%s); they are recovered "
                          "at the next start", directory, exc)
                clean = False
        closed_s = time.monotonic() - started
        for directory in self.log_dirs:
            if directory in self.offline_dirs:
                continue
            try:
                durability.sync_filesystem(directory)
            except OSError as exc:
                log.error("clean stop: syncing log directory %s failed (%s); its logs are recovered at the next "
                          "start", directory, exc)
                clean = False
        synced_s = time.monotonic() - started
        self.checkpoint()
        if logs:
            log.info("closed %d logs in %.2f s (%.2f s closing them, %.2f s syncing the log directories)", len(logs),
                     time.monotonic() - started, closed_s, synced_s - closed_s)
        if clean and self._loaded:
            for directory in self.log_dirs:
                if directory not in self.offline_dirs:
                    checkpoint.write_atomically(directory / CLEAN_SHUTDOWN_FILE, "")
        self._logs.clear()
        self._dir_counts = None


def _write_checkpoints(offsets: list[tuple[Path, dict[str, dict[TopicPartition, int]]]],
                       ) -> list[tuple[Path, OSError]]:
    """Write each directory's checkpoint files; the directories that failed, with why (their files stay as they
    were: each is replaced atomically)."""
    failed = []
    for directory, files in offsets:
        try:
            for name, values in files.items():
                checkpoint.write_offsets(directory / name, values)
        except OSError as exc:
            failed.append((directory, exc))
    return failed


def _tick_logs(logs: list[PartitionLog], now_ms: int, retention: bool, closing: threading.Event) -> None:
    """The logs' flush.ms fsyncs and (with ``retention``) retention, on the flusher thread, until the manager closes
    (its close flushes every log). A failing log is logged and skipped (it has taken itself offline)."""
    for plog in logs:
        if closing.is_set():
            return
        try:
            plog.tick(now_ms, flush_rolled=False, retention=retention)
        except KafkaError as exc:
            log.error("background work on %s failed: %s", plog.name, exc)
        except Exception:  # a race with the log's removal: the next round looks again
            log.exception("background work on %s failed", plog.name)


def _write_new_epoch_checkpoints(logs: list[PartitionLog], closing: threading.Event) -> None:
    """New logs' first leader-epoch checkpoints (a failure takes its log offline and says so; the rest go on),
    until the manager closes: its close threads then write the rest, in parallel."""
    for plog in logs:
        if closing.is_set():
            return
        try:
            plog.write_new_epoch_checkpoint()
        except KafkaError as exc:
            log.error("writing the leader-epoch checkpoint of %s failed: %s", plog.name, exc)


def _close_logs(items: list[tuple[tuple[str, int], PartitionLog]]) -> tuple[bool, dict[tuple[str, int], str]]:
    """Close a slice of the logs; True when every one closed cleanly (each is tried whatever the others did), and
    the producer state of those that have any, for the stop's file."""
    states: dict[tuple[str, int], str] = {}
    return all([_close_log(item, states) for item in items]), states


def _close_log(item: tuple[tuple[str, int], PartitionLog], states: dict[tuple[str, int], str]) -> bool:
    """Close one log; True when it closed cleanly (a failure takes it offline and says so)."""
    (topic, partition), plog = item
    try:
        with durability.deferred():
            plog.close(states)
    except KafkaError as exc:
        log.error("closing %s-%d failed: %s", topic, partition, exc)
        return False
    return not plog.offline
