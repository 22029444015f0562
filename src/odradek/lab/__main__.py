"""``python -m odradek.lab`` (``make lab``): bring a lab up, run the nemesis, or remove a dead run's leftovers."""

from __future__ import annotations

import logging
import signal
import threading

import click

from odradek.lab.netns import SLOTS, acquire_slot, netns_available


@click.group()
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    reason = netns_available()
    if reason is not None:
        raise click.ClickException(reason)


@main.command()
@click.option("--brokers", default=3, show_default=True)
@click.option("--zookeepers", default=3, show_default=True)
def up(brokers: int, zookeepers: int) -> None:
    """Start the hosts and servers, print where they are, and run until Ctrl-C."""
    from odradek.lab.cluster import Lab

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with Lab(brokers=brokers, zookeepers=zookeepers) as lab:
        click.echo(f"bootstrap.servers={lab.bootstrap}")
        click.echo(f"zookeeper.connect={lab.zk_connect}/odradek")
        click.echo(f"logs in {lab.base_dir}")
        stop.wait()


@main.command("run")
@click.option("--seed", default=1, show_default=True)
@click.option("--faults", default=None, type=int, help="how many faults (default: every kind once)")
@click.option("--keep-logs", is_flag=True, help="keep the servers' logs and data (printed path)")
@click.option("--transactional", is_flag=True,
              help="add the transactional consume-transform-produce stage and its read_committed reader")
def run_(seed: int, faults: int | None, keep_logs: bool, transactional: bool) -> None:
    """A nemesis run: load, the seed's faults, the log read back and checked; exit status 1 on any anomaly."""
    import tempfile
    from pathlib import Path

    from odradek.lab.run import run

    base = Path(tempfile.mkdtemp(prefix="odradek-lab-")) if keep_logs else None
    result = run(seed, faults, base_dir=base, transactional=transactional)
    if result.report.anomalies():
        raise SystemExit(1)


@main.command()
@click.option("--events", default=20000, show_default=True)
@click.option("--seconds", default=90.0, show_default=True)
@click.option("--cut-seconds", default=10.0, show_default=True)
def spark(events: int, seconds: float, cut_seconds: float) -> None:
    """odradek demo's pipeline on a Spark standalone cluster (master + two workers) against the lab's brokers,
    the leader of clicks-0 isolated midway; exit status 1 unless the totals are exact."""
    import tempfile
    from pathlib import Path

    from odradek.lab.spark import run_pipeline

    base = Path(tempfile.mkdtemp(prefix="odradek-lab-spark-"))
    click.echo(f"work and logs in {base}")
    if not run_pipeline(base, events=events, seconds=seconds, cut_seconds=cut_seconds):
        raise SystemExit(1)


@main.command()
def clean() -> None:
    """Remove what dead lab runs left behind (slots no living lab holds)."""
    import os

    held = []
    for _ in range(SLOTS):
        try:
            _slot, fd = acquire_slot()  # cleans the slot it takes
        except RuntimeError:
            break
        held.append(fd)
    for fd in held:
        os.close(fd)


if __name__ == "__main__":
    main()
