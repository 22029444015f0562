"""``python -m odradek.apache_kafka fetch`` fills the jar cache (``make jars``); ``... up --version 3.9.2 --brokers 3``
runs a real Kafka cluster on loopback until Ctrl-C, for benches and trials by hand."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from odradek.apache_kafka import KAFKA_3, VERSIONS, KafkaCluster, jars


def _fetch(args: argparse.Namespace) -> int:
    for version in args.version or VERSIONS:
        started = time.monotonic()
        lib = jars.ensure(version)
        count = sum(1 for _ in lib.glob("*.jar"))
        print(f"Apache Kafka {version}: {count} jars in {lib} ({time.monotonic() - started:.1f}s)")
    if not args.version:
        for name, wanted in sorted(jars.BUNDLES.items()):
            started = time.monotonic()
            lib = jars.ensure_bundle(name, wanted())
            count = sum(1 for _ in lib.glob("*.jar"))
            print(f"{name}: {count} jars in {lib} ({time.monotonic() - started:.1f}s)")
    return 0


def _up(args: argparse.Namespace) -> int:
    overrides = dict(item.split("=", 1) for item in args.override)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix=f"kafka-{args.version}-"))
    cluster = KafkaCluster(
        base, version=args.version, brokers=args.brokers, zookeeper=args.zookeeper, overrides=overrides,
        heap_mb=args.heap_mb, quick_start=False,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with cluster.start():
        print(f"Apache Kafka {args.version}, {args.brokers} broker(s), logs under {base}")
        if not cluster.kraft:
            print(f"zookeeper.connect={cluster.zookeeper_connect}")
        print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
        stop.wait()
        print("stopping", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m odradek.apache_kafka", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="fetch the jars of Kafka's versions into the cache")
    fetch.add_argument("--version", action="append",
                       help=f"a Kafka version (repeatable; default: {' '.join(VERSIONS)} and every bundle of "
                            "jars.BUNDLES)")
    fetch.set_defaults(run=_fetch)
    up = sub.add_parser("up", help="run a Kafka cluster on loopback until Ctrl-C")
    up.add_argument("--version", default=KAFKA_3)
    up.add_argument("--brokers", type=int, default=1)
    up.add_argument("--zookeeper", help="a ZooKeeper connect string for 3.x (default: start one)")
    up.add_argument("--dir", help="where the logs and data go (default: a new temporary directory)")
    up.add_argument("--heap-mb", type=int, default=1024, help="each broker's -Xmx (Kafka's script uses 1G)")
    up.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="a broker property")
    up.set_defaults(run=_up)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
