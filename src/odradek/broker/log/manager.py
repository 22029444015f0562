"""All partition logs of one broker's data directory, and the broker-wide checkpoint files beside them.

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
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from odradek.broker.log import checkpoint
from odradek.broker.log.cleaner import LogCleaner
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
CLOSE_THREADS = 32  # concurrent log closes on a clean stop
META_PROPERTIES = "meta.properties"
DELETE_SUFFIX = "-delete"
CLEANER_BACKOFF_MS = 15_000  # Kafka's log.cleaner.backoff.ms: how often a compacted log is looked at
CHECKPOINT_INTERVAL_MS = 5_000  # Kafka checkpoints high watermarks every 5 s (replica.high.watermark...ms)
# Every partition is looked at (flush.ms, rolled segments, retention, compaction) at most this often, and less often
# when a sweep is costly: a broker with tens of thousands of partitions spends at most 1/SWEEP_COST_SHARE of its
# time sweeping instead of starving its event loop.
SWEEP_INTERVAL_MS = 1_000
SWEEP_COST_SHARE = 20



class LogManager:
    def __init__(
        self,
        data_dir: Path | str,
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
        self.data_dir = Path(data_dir)
        self.clock = clock
        self.defaults: dict[str, ConfigValue] = dict(defaults or {})
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._last_sweep_ms: int | None = None
        self._new_dirs = False
        self.retention_check_interval_ms = retention_check_interval_ms
        self._last_retention_ms: int | None = None
        self._sweep_interval_ms = SWEEP_INTERVAL_MS
        self._logs: dict[TopicPartition, PartitionLog] = {}
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
        self._last_checkpoint_ms = clock.now_ms()
        self._loaded = False

    # --- start-up
    # ---------------------------------------------------------------------------------------------

    def load(self, topic_overrides: Mapping[str, Mapping[str, object]] | None = None) -> None:
        """Open and recover every partition directory. Overrides known at start (topic → config overrides) are
        applied before recovery; others can follow through :meth:`get_or_create` or :meth:`update_config`."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_meta_properties()
        for topic, overrides in (topic_overrides or {}).items():
            self._overrides[topic] = dict(overrides)
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery, log_start, high_watermarks = self._read_checkpoints()
        if not recovery and clean:
            clean = False  # a clean marker without checkpoints cannot be trusted
        for path in sorted(self.data_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(DELETE_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            parsed = parse_partition_dir(path.name)
            if parsed is None:
                continue
            self._logs[parsed] = PartitionLog(
                path,
                self._config_for(parsed[0]),
                self.clock,
                recovery_point=recovery.get(parsed, 0),
                log_start_offset=log_start.get(parsed, 0),
                high_watermark=high_watermarks.get(parsed, 0),
                clean_shutdown=clean and parsed in recovery,
            )
        marker.unlink(missing_ok=True)
        checkpoint.fsync_dir(self.data_dir)
        self._loaded = True
        if self._logs:
            log.info("loaded %d partition logs from %s after %s shutdown", len(self._logs), self.data_dir,
                     "a clean" if clean else "an unclean")

    def _read_checkpoints(self) -> tuple[dict[TopicPartition, int], ...]:
        out: list[dict[TopicPartition, int]] = []
        for name in (RECOVERY_POINT_FILE, LOG_START_FILE, HIGH_WATERMARK_FILE):
            try:
                out.append(checkpoint.read_offsets(self.data_dir / name))
            except (ValueError, OSError) as exc:
                log.warning("ignoring unreadable checkpoint %s: %s", name, exc)
                out.append({})
        return tuple(out)

    def _write_meta_properties(self) -> None:
        if self.broker_id is None:
            return
        path = self.data_dir / META_PROPERTIES
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
        self, topic: str, partition: int, config: LogConfig | Mapping[str, object] | None = None
    ) -> PartitionLog:
        """The partition's log, created empty if absent. ``config`` may be a LogConfig or the topic's override
        strings (then resolved against the broker defaults); either way the log adopts it."""
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
        plog = PartitionLog(self.data_dir / partition_dir_name(topic, partition), resolved, self.clock)
        self._logs[TopicPartition(topic, partition)] = plog
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
            checkpoint.fsync_dir(self.data_dir)

    def update_config(self, topic: str, overrides: Mapping[str, object]) -> LogConfig:
        """New topic overrides (IncrementalAlterConfigs): validated, then applied to every partition's log."""
        self._overrides[topic] = dict(overrides)
        config = self._config_for(topic)
        for (t, _), plog in self._logs.items():
            if t == topic:
                plog.update_config(config)
        return config

    def delete_partition(self, topic: str, partition: int) -> None:
        """Rename to ``<topic>-<partition>.<uuid>-delete`` (atomic: the log is gone for every reader at once),
        then remove the files. A crash in between is finished by the next :meth:`load`."""
        plog = self._logs.pop(TopicPartition(topic, partition), None)
        directory = self.data_dir / partition_dir_name(topic, partition)
        if plog is not None:
            plog.detach()
        if not directory.exists():
            return
        doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        try:
            directory.rename(doomed)
            checkpoint.fsync_dir(self.data_dir)
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
        if self._last_sweep_ms is None or now_ms - self._last_sweep_ms >= self._sweep_interval_ms:
            started = time.perf_counter()
            retention = (self._last_retention_ms is None
                         or now_ms - self._last_retention_ms >= self.retention_check_interval_ms)
            if retention:
                self._last_retention_ms = now_ms
            self._sweep(now_ms, retention)
            self._last_sweep_ms = now_ms
            cost_ms = (time.perf_counter() - started) * 1000
            self._sweep_interval_ms = max(SWEEP_INTERVAL_MS, int(cost_ms * SWEEP_COST_SHARE))
        if now_ms - self._last_checkpoint_ms >= self.checkpoint_interval_ms:
            self.checkpoint()
            self._last_checkpoint_ms = now_ms

    def _sweep(self, now_ms: int, retention: bool) -> None:
        for tp, plog in list(self._logs.items()):
            topic, partition = tp
            if plog.offline:
                continue
            try:
                plog.tick(now_ms, flush_rolled=self._flusher_pool is None, retention=retention)
                if self._flusher_pool is not None:
                    self._schedule_flush(tp, plog)
            except KafkaError as exc:
                log.error("background work on %s-%d failed: %s", topic, partition, exc)
            if plog.config.compact:
                self._schedule_cleaning(tp, plog, now_ms)

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
        concurrent.futures.wait([*self._cleaning.values(), *self._flushing.values()], timeout=timeout_s)

    def checkpoint(self) -> None:
        """Write the three broker-level offset checkpoints (each atomically)."""
        logs = {tp: p for tp, p in self._logs.items() if not p.offline}
        try:
            checkpoint.write_offsets(self.data_dir / RECOVERY_POINT_FILE,
                                     {tp: p.recovery_point for tp, p in logs.items()})
            checkpoint.write_offsets(self.data_dir / LOG_START_FILE,
                                     {tp: p.log_start_offset for tp, p in logs.items()})
            checkpoint.write_offsets(self.data_dir / HIGH_WATERMARK_FILE,
                                     {tp: p.high_watermark for tp, p in logs.items()})
        except OSError as exc:
            log.error("writing checkpoints in %s failed: %s", self.data_dir, exc)
            raise KafkaError(ErrorCode.kafka_storage_error, f"checkpoint failed: {exc}") from exc

    def abandon(self) -> None:
        """Stop background work without flushing, closing or checkpointing: what a crash leaves on disk."""
        for pool in (self._cleaner_pool, self._flusher_pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        for plog in self._logs.values():
            plog.detach()  # descriptors go as a dead process's would; nothing is written
        self._logs.clear()

    def close(self) -> None:
        """Flush every log, checkpoint, and mark the shutdown clean only if every log closed cleanly."""
        for pool in (self._cleaner_pool, self._flusher_pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        logs = list(self._logs.items())
        # fsyncs release the GIL and the disk takes many at once: closing logs in parallel is what lets a
        # broker with 10,000 logs stop in seconds rather than one fsync after another.
        with concurrent.futures.ThreadPoolExecutor(CLOSE_THREADS, thread_name_prefix="log-close") as pool:
            closed = list(pool.map(_close_log, logs))
        clean = all(closed)
        self.checkpoint()
        if clean and self._loaded:
            checkpoint.write_atomically(self.data_dir / CLEAN_SHUTDOWN_FILE, "")
        self._logs.clear()


def _close_log(item: tuple[tuple[str, int], PartitionLog]) -> bool:
    """Close one log; True when it closed cleanly (a failure takes it offline and says so)."""
    (topic, partition), plog = item
    try:
        plog.close()
    except KafkaError as exc:
        log.error("closing %s-%d failed: %s", topic, partition, exc)
        return False
    return not plog.offline
