"""Structured Streaming job: page views per page per minute, with a watermark, to a topic and to Parquet.

Reads the clickstream through Spark's own Kafka connector (``--format kafka``, the spark-sql-kafka-0-10 jars
handed to Spark through ``spark.jars``) or odradek's pure-Python source (``--format odradek``, no jar), counts views
in one-minute event-time windows (late events up to one minute are still counted; a window is emitted once the
watermark passes it), and writes every finished window twice: as JSON records to a topic (keyed by page) and as
Parquet files. Each sink is its own query with its own checkpoint. Parquet (Spark's file sink) is exactly-once on
restart with either format; the topic is exactly-once with odradek's sink (its batch-id commit markers) and
at-least-once with Spark's.

    python examples/page_views.py --bootstrap HOST:PORT --workdir /tmp/pv --seconds 60 --format kafka
    python examples/page_views.py --bootstrap HOST:PORT --workdir /tmp/pv --check totals.json

The queries use a processing-time trigger on purpose: a window is emitted in the micro-batch after the
one whose events moved the watermark past it, and Trigger.AvailableNow stops before that batch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clickstream import FLUSH_PAGE, load_totals

import odradek.spark

FORMATS = ("kafka", "odradek")
"""Spark's own Kafka connector, or odradek's pure-Python source and sink: the same options, the same totals."""
EVENT_SCHEMA = "user string, page string, ts long"
VIEWS_SCHEMA = "page string, window_start timestamp, window_ms long, views long"


def page_views(spark: SparkSession, bootstrap: str, topic: str, fmt: str = "odradek") -> DataFrame:
    events = (
        spark.readStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "50000")
        .load()
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.page", (F.col("e.ts") / 1000).cast("timestamp").alias("event_time"))
    )
    # No filter on the generator's flush marker here: Spark would push it below the watermark, and the
    # marker exists precisely to move the watermark. Its own window is never final; readers skip it.
    return (
        events.withWatermark("event_time", "1 minute")
        .groupBy(F.window("event_time", "1 minute"), "page")
        .count()
        .select(
            "page",
            F.col("window.start").alias("window_start"),
            (F.unix_timestamp("window.start") * 1000).alias("window_ms"),
            F.col("count").alias("views"),
        )
    )


def start_queries(spark: SparkSession, bootstrap: str, topic: str, out_topic: str, workdir: Path,
                  fmt: str = "odradek"):
    views = page_views(spark, bootstrap, topic, fmt)
    to_topic = (
        views.select(
            F.col("page").alias("key"),
            F.to_json(F.struct("page", "window_ms", "views")).alias("value"),
        )
        .writeStream.format(fmt)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out_topic)
        .option("checkpointLocation", str(workdir / "checkpoint-topic"))
        .outputMode("append")
    )
    to_parquet = (
        views.writeStream.format("parquet")
        .option("path", str(workdir / "page_views.parquet"))
        .option("checkpointLocation", str(workdir / "checkpoint-parquet"))
        .outputMode("append")
    )
    first = to_topic.trigger(processingTime="1 second").start()
    _first_batch_planned(first)
    return [first, to_parquet.trigger(processingTime="1 second").start()]


def _first_batch_planned(query, timeout_s: float = 120.0) -> None:
    """Wait until ``query`` reports progress (or stops, or ``timeout_s`` passes).

    Starting a query starts Python processes on the driver (the data source's planners), and Spark gives each one
    10 s to connect back. Two queries starting at once on a small, busy machine can miss that deadline, so the
    second query starts once the first is running.
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.lastProgress is None and time.monotonic() < deadline:
        time.sleep(0.2)


def parquet_totals(spark: SparkSession, workdir: Path) -> Counter[tuple[str, int]]:
    path = workdir / "page_views.parquet"
    if not path.exists():
        return Counter()
    rows = spark.read.schema(VIEWS_SCHEMA).parquet(str(path)).collect()
    totals: Counter[tuple[str, int]] = Counter()
    for r in rows:
        if r.page != FLUSH_PAGE:
            totals[(r.page, int(r.window_ms))] += r.views
    return totals


def session(app: str = "odradek-page-views", progress_bars: bool = True, fmt: str = "odradek") -> SparkSession:
    """A local session (``SPARK_MASTER`` to change it); ``progress_bars=False`` hides Spark's console stage bars.

    ``fmt="kafka"`` puts Spark's Kafka connector on ``spark.jars`` (fetched with Maven on first use); a session that
    already runs keeps the jars it started with.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    if fmt == "kafka":
        from odradek.apache_kafka.spark import spark_jars

        builder = builder.config("spark.jars", spark_jars())
    spark = (
        builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        .appName(app)
        .config("spark.ui.showConsoleProgress", str(progress_bars).lower())
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    odradek.spark.register(spark)
    return spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--out-topic", default="page-views")
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=120.0, help="longest run time")
    parser.add_argument("--check", type=Path, help="stop once the Parquet output equals these generator totals")
    parser.add_argument("--format", choices=FORMATS, default="kafka",
                        help="Spark's own Kafka connector (kafka) or odradek's pure-Python source and sink")
    args = parser.parse_args()
    spark = session(fmt=args.format)
    want = load_totals(args.check) if args.check else None
    queries = start_queries(spark, args.bootstrap, args.topic, args.out_topic, args.workdir, args.format)
    deadline = time.monotonic() + args.seconds
    got: Counter[tuple[str, int]] = Counter()
    while time.monotonic() < deadline:
        time.sleep(2)
        got = parquet_totals(spark, args.workdir)
        if want is not None and got == want:
            break
    for q in queries:
        q.stop()
    print(f"{sum(got.values())} page views in {len(got)} (page, minute) windows")
    if want is not None:
        if got != want:
            raise SystemExit(f"MISMATCH: {sum(got.values())} counted, {sum(want.values())} produced")
        print("totals match what the generator produced")
    spark.stop()


if __name__ == "__main__":
    main()
