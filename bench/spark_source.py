"""Batch read and write throughput of Spark's own Kafka connector (``format("kafka")``) and odradek's pure-Python
source and sink (``format("odradek")``) on the same cluster, beside the same records read from Parquet.

Produces N records of 100-byte values (once per run; large producer batches) into a fresh topic, then in
one local[2] SparkSession (with the connector on ``spark.jars``) times, for each connector: source ->
groupBy(key).count(), and a variant that also touches every value (sum of lengths) so Parquet cannot prune the
value column; the same over Parquet written from the same records; then the N records written from Parquet into a
fresh topic through each sink (odradek's also with transactionalIdPrefix). Prints Markdown tables for
bench/RESULTS.md.

    .venv/bin/python bench/spark_source.py                 # 10M records, broker started here
    .venv/bin/python bench/spark_source.py --records 1000000 --bootstrap HOST:PORT
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "spark"))
sys.path.insert(0, str(ROOT / "tests"))  # spark_brokers imports kafka_clients from there

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

VALUE_SIZE = 100
KEYS = 100


def produce(bootstrap: str, topic: str, records: int) -> float:
    """Produce ``records`` values with keys k00..k99; returns records per second."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 100,
            "batch.size": 1_000_000,
            "batch.num.messages": 100_000,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_000_000,
        }
    )
    value = os.urandom(VALUE_SIZE)
    keys = [b"k%02d" % i for i in range(KEYS)]
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value=value, key=keys[i % KEYS], on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 100_000 == 0:
            producer.poll(0)
    if producer.flush(600) != 0 or errors:
        raise RuntimeError(f"produce failed: {errors[:3]}")
    return records / (time.perf_counter() - start)


class PrebuiltSource:
    """Factory for a Python data source that yields one pre-built Arrow batch of the Kafka schema again and
    again: no network, no decoding. Its speed is what Spark itself can ingest from any Python source with
    this schema on this machine, the ceiling for the odradek source."""

    @staticmethod
    def register(spark, records: int, partitions: int) -> str:
        from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

        from odradek.spark.schema import source_ddl

        class Reader(DataSourceReader):
            def partitions(self):
                return [InputPartition(i) for i in range(partitions)]

            def read(self, partition):
                import numpy as np
                import pyarrow as pa

                from odradek.spark.schema import arrow_schema

                n = 36_000
                batch = pa.RecordBatch.from_arrays(
                    [
                        pa.array([b"k%02d" % (i % KEYS) for i in range(n)], pa.binary()),
                        pa.array([os.urandom(VALUE_SIZE)] * n, pa.binary()),
                        pa.repeat(pa.scalar("bench-spark-topic"), n),
                        pa.repeat(pa.scalar(0, pa.int32()), n),
                        pa.array(np.arange(n, dtype=np.int64)),
                        pa.array(np.zeros(n, np.int64)).view(pa.timestamp("us", tz="UTC")),
                        pa.repeat(pa.scalar(0, pa.int32()), n),
                    ],
                    schema=arrow_schema(False),
                )
                left = records // partitions + (1 if partition.value < records % partitions else 0)
                while left > 0:
                    yield batch.slice(0, min(left, n))
                    left -= n

        class Source(DataSource):
            @classmethod
            def name(cls):
                return "prebuilt_arrow"

            def schema(self):
                return source_ddl(False)

            def reader(self, schema):
                return Reader()

        spark.dataSource.register(Source)
        return "prebuilt_arrow"


def time_writes(spark, bootstrap: str, parquet_path: str, records: int, partitions: int) -> list[tuple[str, float]]:
    """Write the records from Parquet into a fresh topic through each sink; each topic must then hold all of them."""
    from odradek.spark.cluster import Cluster

    cluster = Cluster({"bootstrap.servers": bootstrap})
    admin = AdminClient({"bootstrap.servers": bootstrap})
    rows = []
    for label, fmt, extra in [
        ("Spark's Kafka connector", "kafka", {}),
        ("odradek sink", "odradek", {}),
        ("odradek sink, transactionalIdPrefix", "odradek", {"transactionalIdPrefix": f"bench-{os.getpid()}"}),
    ]:
        topic = f"bench-spark-out-{fmt}-{len(rows)}-{os.getpid()}"
        for future in admin.create_topics([NewTopic(topic, partitions, 1)], request_timeout=60).values():
            future.result()
        writer = spark.read.parquet(parquet_path).select("key", "value").write.format(fmt).mode("append")
        for name, value in {"kafka.bootstrap.servers": bootstrap, "topic": topic, **extra}.items():
            writer = writer.option(name, value)
        _, seconds, _ = timed(label, writer.save)
        tps = [(topic, p) for p in range(partitions)]
        written = sum(cluster.latest(tps).values()) - sum(cluster.earliest(tps).values())
        # A transaction's commit marker takes an offset of its own in each partition it wrote to.
        if written < records or (not extra and written != records):
            raise RuntimeError(f"{label}: {written} offsets written for {records} records")
        rows.append((label, seconds))
        print(f"write through {label}: {seconds:.2f} s, {records / seconds:,.0f} rows/s", flush=True)
    return rows


def timed(label: str, action) -> tuple[str, float, object]:
    start = time.perf_counter()
    result = action()
    return label, time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap", help="use a running cluster instead of starting a broker")
    parser.add_argument("--broker", choices=["odradek", "noida"], help="which broker to start (default: odradek)")
    parser.add_argument("--skip-writes", action="store_true", help="time the reads only")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    broker = None
    if args.bootstrap:
        bootstrap, kind = args.bootstrap, "external"
    else:
        if args.broker:
            os.environ["ODRADEK_SPARK_BROKER"] = args.broker
        from spark_brokers import start_broker

        broker = start_broker()
        bootstrap, kind = broker.bootstrap, broker.kind
    workdir = tempfile.mkdtemp(prefix="spark-bench-")
    try:
        topic = f"bench-spark-{os.getpid()}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(topic, args.partitions, 1)], request_timeout=60).values():
            future.result()
        time.sleep(1)
        print(f"broker {kind} at {bootstrap}; producing {args.records:,} x {VALUE_SIZE} B ...", flush=True)
        produce_rate = produce(bootstrap, topic, args.records)
        print(f"produced at {produce_rate:,.0f} records/s", flush=True)

        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        import odradek.spark
        from odradek.apache_kafka.spark import spark_jars

        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.jars", spark_jars())
            .appName("odradek-spark-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "3g")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        odradek.spark.register(spark)
        def reader(fmt: str):
            return (
                spark.read.format(fmt)
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("minPartitions", str(max(args.partitions, 4)))
            )

        source, connector = reader("odradek"), reader("kafka")
        parquet_path = str(Path(workdir) / "records.parquet")

        def count_source():
            return source.load().groupBy("key").count().collect()

        def count_connector():
            return connector.load().groupBy("key").count().collect()

        def full_connector():
            return connector.load().groupBy("key").agg(F.count("*"), F.sum(F.length("value"))).collect()

        def count_parquet():
            return spark.read.parquet(parquet_path).groupBy("key").count().collect()

        def full_source():
            return source.load().groupBy("key").agg(F.count("*"), F.sum(F.length("value"))).collect()

        def full_parquet():
            return spark.read.parquet(parquet_path).groupBy("key").agg(F.count("*"), F.sum(F.length("value"))).collect()

        source.load().limit(10).collect()  # start Python workers once
        connector.load().limit(10).collect()  # and load the connector's classes
        _, write_s, _ = timed("write parquet", lambda: source.load().write.mode("overwrite").parquet(parquet_path))
        print(f"parquet written through the source in {write_s:.1f} s", flush=True)
        prebuilt = PrebuiltSource.register(spark, args.records, max(args.partitions, 4))

        def count_prebuilt():
            return spark.read.format(prebuilt).load().groupBy("key").count().collect()

        rows = []
        for label, action in [
            (
                "ceiling: Python source yielding pre-built Arrow batches (no Kafka), groupBy(key).count()",
                count_prebuilt,
            ),
            ("odradek source, groupBy(key).count()", count_source),
            ("Spark's Kafka connector, groupBy(key).count()", count_connector),
            ("Parquet, groupBy(key).count()", count_parquet),
            ("odradek source, count + sum(length(value))", full_source),
            ("Spark's Kafka connector, count + sum(length(value))", full_connector),
            ("Parquet, count + sum(length(value))", full_parquet),
        ]:
            _, seconds, result = timed(label, action)
            total = sum(r[1] for r in result)
            if total != args.records:
                raise RuntimeError(f"{label}: counted {total}, produced {args.records}")
            rows.append((label, seconds))
            print(f"{label}: {seconds:.2f} s, {args.records / seconds:,.0f} rows/s", flush=True)
        writes = [] if args.skip_writes else time_writes(spark, bootstrap, parquet_path, args.records, args.partitions)
        spark.stop()

        payload_mb = args.records * (VALUE_SIZE + 3) / 1e6
        print()
        print(
            f"{args.records:,} records of {VALUE_SIZE}-byte values, {args.partitions} partitions, "
            f"broker {kind}, local[2]"
        )
        print()
        print("| read | seconds | rows/s | MB/s (key+value) | vs Parquet |")
        print("|---|---|---|---|---|")
        baseline = {"count": rows[3][1], "sum": rows[6][1]}
        for label, seconds in rows:
            base = baseline["sum" if "sum" in label else "count"]
            print(
                f"| {label} | {seconds:.2f} | {args.records / seconds:,.0f} | {payload_mb / seconds:,.0f} "
                f"| {base / seconds:.2f}x |"
            )
        print(f"\nproduce (confluent-kafka, acks=all, 1 MB batches): {produce_rate:,.0f} records/s")
        if writes:
            print()
            print("| write (from Parquet, key + value) | seconds | rows/s |")
            print("|---|---|---|")
            for label, seconds in writes:
                print(f"| {label} | {seconds:.2f} | {args.records / seconds:,.0f} |")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if broker is not None:
            from spark_brokers import stop_broker

            stop_broker(broker)


if __name__ == "__main__":
    main()
