"""``odradek perf produce`` and ``odradek perf consume``: kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh.

They print what Kafka's perf tools print, in the same formats, so results compare line for line with a Kafka run:
the producer a line per 5-second window and a summary with latency percentiles (latency is send to acknowledgement,
per record), the consumer its comma-separated summary. A rich progress bar runs on stderr while a terminal watches.
"""

from __future__ import annotations

import datetime
import random
import string
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import click

from odradek.cli.clients import closed_when_done
from odradek.cli.output import echo_beside, progress
from odradek.cli.security import command_config_option, rdkafka_config

MB = 1024 * 1024
REPORT_EVERY_S = 5.0


@dataclass
class LatencyStats:
    """Kafka's ProducerPerformance.Stats: totals, the current window, and latencies for the percentiles."""

    start: float
    count: int = 0
    bytes: int = 0
    max_latency: float = 0.0
    total_latency: float = 0.0
    latencies: list[float] = field(default_factory=list)
    window_start: float = 0.0
    window_count: int = 0
    window_bytes: int = 0
    window_max: float = 0.0
    window_total: float = 0.0

    def record(self, latency_ms: float, size: int, now: float) -> str | None:
        """Count one acknowledged record; return a window line when a window of 5 s has closed."""
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.latencies.append(latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total += latency_ms
        self.window_max = max(self.window_max, latency_ms)
        if now - self.window_start < REPORT_EVERY_S:
            return None
        elapsed = max(now - self.window_start, 1e-9)
        line = (f"{self.window_count} records sent, {self.window_count / elapsed:.1f} records/sec "
                f"({self.window_bytes / MB / elapsed:.2f} MB/sec), {self.window_total / self.window_count:.1f} ms "
                f"avg latency, {self.window_max:.1f} ms max latency.")
        self.window_start, self.window_count, self.window_bytes = now, 0, 0
        self.window_max = self.window_total = 0.0
        return line

    def summary(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        ordered = sorted(self.latencies)

        def pct(q: float) -> int:
            return int(ordered[min(len(ordered) - 1, int(q * len(ordered)))]) if ordered else 0

        avg = self.total_latency / self.count if self.count else 0.0
        return (f"{self.count} records sent, {self.count / elapsed:f} records/sec ({self.bytes / MB / elapsed:.2f} "
                f"MB/sec), {avg:.2f} ms avg latency, {self.max_latency:.2f} ms max latency, {pct(0.5)} ms 50th, "
                f"{pct(0.95)} ms 95th, {pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.")


@click.group()
def perf() -> None:
    """Throughput and latency tests, as Kafka's perf-test tools run them."""


@perf.command("produce")
@click.option("--bootstrap-server", "bootstrap", default=None, envvar="ODRADEK_BOOTSTRAP",
              help="or bootstrap.servers in --producer-props")
@click.option("--topic", required=True)
@click.option("--num-records", required=True, type=int)
@click.option("--record-size", required=True, type=int, help="bytes per record")
@click.option("--throughput", required=True, type=float, help="records/sec at most; -1 for no limit")
@click.option("--producer-props", multiple=True, help="producer configs name=value ... (as many as follow)")
@click.argument("more_props", nargs=-1, metavar="")
@command_config_option("--producer.config")
def produce_perf(
    bootstrap: str | None, topic: str, num_records: int, record_size: int, throughput: float,
    producer_props: tuple[str, ...], more_props: tuple[str, ...], command_config: dict[str, str],
) -> None:
    """Send --num-records records of --record-size bytes and report rates and latencies."""
    from confluent_kafka import Producer

    # Kafka's --producer-props takes every name=value after it; click gives the first to the option, the rest here.
    config = rdkafka_config(bootstrap or "", command_config, producer_props + more_props)
    if not config.get("bootstrap.servers"):
        raise click.UsageError("give --bootstrap-server or --producer-props bootstrap.servers=HOST:PORT")
    config.setdefault("linger.ms", 5)
    producer = closed_when_done(Producer(config))
    rng = random.Random(0)
    payload = "".join(rng.choice(string.ascii_uppercase) for _ in range(record_size)).encode()
    now = time.monotonic()
    stats = LatencyStats(start=now, window_start=now)
    failures = 0

    bar = progress(transient=True)

    def on_delivery(sent_at: float) -> Any:
        def callback(error: Any, _message: Any) -> None:
            nonlocal failures
            if error is not None:
                failures += 1
                return
            done = time.monotonic()
            line = stats.record((done - sent_at) * 1000, record_size, done)
            if line:
                echo_beside(bar, line)

        return callback

    with bar:
        task = bar.add_task(f"producing to {topic}", total=num_records)
        for i in range(num_records):
            if throughput > 0:
                due = stats.start + i / throughput
                while time.monotonic() < due:  # throttle to the asked rate, serving deliveries meanwhile
                    producer.poll(min(0.01, max(0.0, due - time.monotonic())))
            sent_at = time.monotonic()
            while True:
                try:
                    producer.produce(topic, payload, on_delivery=on_delivery(sent_at))
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
            bar.update(task, completed=stats.count)
        while producer.flush(0.1):
            bar.update(task, completed=stats.count)
        bar.update(task, completed=stats.count)
    click.echo(stats.summary(time.monotonic()))
    if failures:
        click.echo(f"{failures} records failed", err=True)
        sys.exit(1)


def _java_time(t: float) -> str:
    """Kafka's perf-test date format, yyyy-MM-dd HH:mm:ss:SSS."""
    moment = datetime.datetime.fromtimestamp(t)
    return moment.strftime("%Y-%m-%d %H:%M:%S:") + f"{moment.microsecond // 1000:03d}"


@perf.command("consume")
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--topic", required=True)
@click.option("--messages", "--num-records", "messages", required=True, type=int, help="records to consume")
@click.option("--group", default=None, help="consumer group (a fresh perf-consumer-N without it)")
@click.option("--timeout", "timeout_ms", default=10000, show_default=True, type=int,
              help="ms without a record before giving up")
@click.option("--from-latest", is_flag=True, help="start at the log end instead of the earliest offset")
@click.option("--hide-header", is_flag=True)
@click.option("--consumer-property", "consumer_properties", multiple=True, help="librdkafka consumer config")
@command_config_option("--consumer.config")
def consume_perf(
    bootstrap: str, topic: str, messages: int, group: str | None, timeout_ms: int, from_latest: bool,
    hide_header: bool, consumer_properties: tuple[str, ...], command_config: dict[str, str],
) -> None:
    """Consume --messages records as fast as possible and report MB/sec and records/sec."""
    from confluent_kafka import Consumer

    config = rdkafka_config(bootstrap, command_config, consumer_properties)
    config.setdefault("group.id", group or f"perf-consumer-{random.randrange(100000)}")
    config.setdefault("auto.offset.reset", "latest" if from_latest else "earliest")
    config.setdefault("enable.auto.commit", True)
    consumer = closed_when_done(Consumer(config))
    assigned_at: list[float] = []
    consumer.subscribe([topic], on_assign=lambda _c, _p: assigned_at.append(time.time()))
    start = time.time()
    count = size = 0
    last = time.monotonic()
    with progress(transient=True) as bar:
        task = bar.add_task(f"consuming {topic}", total=messages)
        while count < messages:
            batch = consumer.consume(min(500, messages - count), 0.2)
            got = [m for m in batch if m.error() is None]
            if not got:
                if (time.monotonic() - last) * 1000 >= timeout_ms:
                    click.echo(f"WARNING: Exiting before consuming the expected number of messages: timeout "
                               f"({timeout_ms} ms) exceeded. You can use the --timeout option to increase the "
                               "timeout.", err=True)
                    break
                continue
            last = time.monotonic()
            count += len(got)
            size += sum(len(m.value() or b"") + len(m.key() or b"") for m in got)
            bar.update(task, completed=count)
    end = time.time()
    consumer.close()
    elapsed = max(end - start, 1e-9)
    rebalance = (assigned_at[0] - start) if assigned_at else 0.0
    fetch = max(elapsed - rebalance, 1e-9)
    mb = size / MB
    if not hide_header:
        click.echo("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    click.echo(f"{_java_time(start)}, {_java_time(end)}, {mb:.4f}, {mb / elapsed:.4f}, {count}, "
               f"{count / elapsed:.4f}, {int(rebalance * 1000)}, {int(fetch * 1000)}, {mb / fetch:.4f}, "
               f"{count / fetch:.4f}")
