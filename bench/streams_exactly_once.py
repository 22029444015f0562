"""Kafka Streams exactly_once_v2 on odradek, the long variant of ``tests/streams/``: more input, in rounds, each
round killing the broker that leads one changelog partition and SIGKILLing one of the two instances (restarted at
once on the same state directory, which exactly-once Streams wipes and restores from the changelogs). The internal
topics roll a segment every few seconds (``topic.segment.ms``) and are cleaned at any dirty ratio, so the cleaner
compacts the changelogs while the application runs and the restores read compacted, transactional changelogs.

At the end the totals and window counts read under read_committed must be exact (as in the test); the script
prints, as Markdown, each round's time from producing its input to the application committing past it, the
end-to-end rate, and what the cleaner removed from the changelogs. ``--kafka`` runs the same rounds on three Apache
Kafka brokers, for comparison.

    .venv/bin/python bench/streams_exactly_once.py [--rounds 6] [--lines 1500] [--no-faults] [--static] [--kafka]
        [--setting num.standby.replicas=1 ...]
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "streams"))

import streams_app as app  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from brokers import wait_for  # noqa: E402
from kafka_clients import close_opened, opened  # noqa: E402
from odradek.apache_kafka import KAFKA_4, KafkaCluster, compile_java, jars  # noqa: E402
from odradek.broker.log import cleaner  # noqa: E402
from odradek.testing import start_cluster  # noqa: E402

SETTINGS = ("repartition.purge.interval.ms=1000", "topic.segment.ms=3000", "topic.min.cleanable.dirty.ratio=0.01")
"""Extra Streams settings: purge the repartition topic every second; internal topics roll every 3 s and are
compacted at any dirty ratio (``topic.`` settings apply to the internal topics Streams creates)."""
TIMEOUT_S = 600.0


def _count_cleaning() -> Counter[str]:
    """Records the cleaner removes, per topic, counted by wrapping :meth:`LogCleaner.maybe_clean` (the brokers run
    in this process); the cleaning itself is untouched."""
    removed: Counter[str] = Counter()
    original = cleaner.LogCleaner.maybe_clean

    def counting(self: cleaner.LogCleaner, plog: Any, now_ms: int) -> cleaner.CleanStats | None:
        stats = original(self, plog, now_ms)
        if stats is not None:
            removed[plog.directory.name.rsplit("-", 1)[0]] += stats.records_removed
        return stats

    cleaner.LogCleaner.maybe_clean = counting  # type: ignore[method-assign]
    return removed


class _Kafka:
    """Three Apache Kafka brokers (KRaft, each also a controller) behind the calls the rounds make of odradek's
    test cluster."""

    def __init__(self, base: Path) -> None:
        self.cluster = KafkaCluster(base, version=KAFKA_4, brokers=3).start()
        self.bootstrap_servers = self.cluster.bootstrap_servers

    def kill(self, node_id: int) -> None:
        self.cluster.broker(node_id).kill()

    def start_broker(self, node_id: int) -> None:
        self.cluster.broker(node_id).start()

    def close(self) -> None:
        self.cluster.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--lines", type=int, default=1500, help="input lines per round")
    parser.add_argument("--no-faults", action="store_true", help="kill nothing: the same rounds as a baseline")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help="a further Streams setting for both instances (num.standby.replicas=1, ...)")
    parser.add_argument("--static", action="store_true",
                        help="static membership: each instance a group.instance.id of its own")
    parser.add_argument("--kafka", action="store_true",
                        help=f"the same rounds on three Apache Kafka {KAFKA_4} brokers (KRaft) instead of odradek")
    args = parser.parse_args()

    removed = _count_cleaning()
    work = Path(tempfile.mkdtemp(prefix="bench-streams-"))
    lib = jars.ensure_bundle("kafka-streams", jars.streams())
    classes = compile_java(KAFKA_4, *sorted(app.JAVA_DIR.glob("*.java")), out_dir=work / "classes", lib=lib)
    cluster: Any = _Kafka(work / "kafka") if args.kafka else start_cluster(work / "odradek", 3)
    bootstrap = cluster.bootstrap_servers
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    app.create_topics(admin)
    base_ms = (int(time.time() * 1000) // app.WINDOW_MS - 10) * app.WINDOW_MS
    parts = [app.input_lines(seed, args.lines, base_ms) for seed in range(1, args.rounds + 1)]
    totals, windowed = app.expected_counts(line for part in parts for line in part)

    def settings(name: str) -> list[str]:
        return [*SETTINGS, *args.setting, *([f"group.instance.id=instance-{name}"] if args.static else [])]

    def start(name: str, log: str) -> app.Instance:
        return app.Instance(log, name, bootstrap, classes, lib, work, *settings(name))

    instances = {name: start(name, name) for name in ("a", "b")}
    rows = []
    try:
        for instance in instances.values():
            instance.wait_running(TIMEOUT_S)
        started = time.monotonic()
        for round_no, part in enumerate(parts):
            round_start = time.monotonic()
            app.produce(bootstrap, app.INPUT, part)
            upto = app.ends(bootstrap, app.INPUT)
            killed = "nothing"
            if not args.no_faults:
                changelog = (app.COUNTS_CHANGELOG, app.WINDOWED_CHANGELOG)[round_no % 2]
                victim = app.leader(admin, changelog, round_no % app.PARTITIONS)
                cluster.kill(victim)
                name = "ab"[round_no % 2]
                instances[name].kill()
                instances[name] = start(name, f"{name}{round_no}")
                killed = f"broker {victim} ({changelog}-{round_no % app.PARTITIONS}), instance {name}"
            wait_for(lambda upto=upto: app.committed(bootstrap, app.INPUT) == upto, TIMEOUT_S, interval=0.5,
                     what=f"round {round_no}'s input committed")
            if not args.no_faults:
                cluster.start_broker(victim)
            rows.append((round_no, killed, time.monotonic() - round_start))
        app.CommittedOutput(bootstrap, app.OUTPUT, app.PARTITIONS).wait_for_exactly(totals, TIMEOUT_S)
        app.CommittedOutput(bootstrap, f"{app.OUTPUT}-windowed", app.PARTITIONS).wait_for_exactly(windowed, TIMEOUT_S)
        elapsed = time.monotonic() - started
    finally:
        for instance in instances.values():
            if instance.proc.poll() is None:
                instance.kill()
        close_opened()
        cluster.close()

    lines = args.rounds * args.lines
    words = sum(totals.values())
    print(f"Streams {jars.STREAMS_VERSION}, exactly_once_v2, 2 instances, "
          f"3 {'Apache Kafka ' + KAFKA_4 if args.kafka else 'odradek'} brokers, "
          f"{platform.python_implementation()} {platform.python_version()}, {args.rounds} rounds of {args.lines} lines"
          + "".join(f", {s}" for s in args.setting) + (", static membership" if args.static else ""))
    print()
    print("| round | killed | produce to committed (s) |")
    print("|---|---|---|")
    for round_no, killed, seconds in rows:
        print(f"| {round_no} | {killed} | {seconds:.1f} |")
    print()
    print(f"exact counts: {len(totals)} words, {len(windowed)} windows; {lines} lines ({words} words) in "
          f"{elapsed:.1f} s end to end: {lines / elapsed:.0f} lines/s, {words / elapsed:.0f} words/s")
    if not args.kafka:
        print("records the cleaner removed: " + ", ".join(f"{t} {n}" for t, n in sorted(removed.items())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
