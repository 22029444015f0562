"""MirrorMaker 2 copying a topic between Apache Kafka 3.9 and odradek, both directions at once: records per second.

One Kafka 3.9 broker (ZooKeeper mode, its own ZooKeeper) and one odradek broker; ``--records`` records of
``--size`` bytes are produced to ``to-odradek`` on Kafka and to ``to-kafka`` on odradek before MirrorMaker 2 starts
(dedicated mode, one JVM, the ``connect`` jar bundle). The bench times, per direction, MirrorMaker's start to the first
mirrored record on the target and the first record to the last (the copy rate), reading the target's end offsets.

    .venv/bin/python bench/mirror_maker.py                    # 200,000 records of 512 bytes each way
    .venv/bin/python bench/mirror_maker.py --records 50000 --partitions 1
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from odradek.apache_kafka import KAFKA_3, KafkaCluster
from odradek.apache_kafka.connect import MirrorMaker
from produce_consume import create_topic, run_broker  # bench/ is the script's own directory, first on sys.path


def fill(bootstrap: str, topic: str, partitions: int, records: int, size: int) -> None:
    create_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20,
                         "queue.buffering.max.kbytes": 1 << 20})
    value = b"m" * size
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(300):
        raise SystemExit(f"records to {topic} left unacknowledged")


def end_offsets(consumer: Consumer, topic: str, partitions: int) -> int:
    """The sum of ``topic``'s end offsets, 0 while the topic does not exist yet."""
    if topic not in consumer.list_topics(timeout=10).topics:
        return 0
    return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-mm2-") as tmp, \
            KafkaCluster(Path(tmp, "kafka"), version=KAFKA_3).start() as kafka_cluster, \
            run_broker("odradek") as odradek:
        kafka = kafka_cluster.bootstrap_servers
        flows = {"kafka->odradek": (kafka, "to-odradek", odradek, "kafka.to-odradek"),
                 "odradek->kafka": (odradek, "to-kafka", kafka, "odradek.to-kafka")}
        for source, topic, _target, _remote in flows.values():
            fill(source, topic, args.partitions, args.records, args.size)
        properties: dict[str, object] = {
            "clusters": "kafka, odradek", "kafka.bootstrap.servers": kafka, "odradek.bootstrap.servers": odradek,
            "replication.factor": 1, "checkpoints.topic.replication.factor": 1,
            "heartbeats.topic.replication.factor": 1, "offset-syncs.topic.replication.factor": 1,
            "offset.storage.replication.factor": 1, "status.storage.replication.factor": 1,
            "config.storage.replication.factor": 1, "refresh.topics.interval.seconds": 1,
        }
        for flow, (_source, topic, _target, _remote) in flows.items():
            properties.update({f"{flow}.enabled": "true", f"{flow}.topics": topic})
        mm2 = MirrorMaker(Path(tmp, "mm2"), properties).start()
        readers = {flow: Consumer({"bootstrap.servers": target, "group.id": "bench-mm2"})
                   for flow, (_s, _t, target, _r) in flows.items()}
        started = time.monotonic()
        first: dict[str, float] = {}
        done: dict[str, float] = {}
        try:
            while len(done) < len(flows):
                mm2.check_alive()
                if time.monotonic() - started > args.timeout:
                    raise SystemExit(f"not mirrored after {args.timeout:.0f}s: {sorted(set(flows) - set(done))}")
                for flow, (_s, _t, _target, remote) in flows.items():
                    if flow in done:
                        continue
                    copied = end_offsets(readers[flow], remote, args.partitions)
                    now = time.monotonic()
                    if copied and flow not in first:
                        first[flow] = now
                    if copied >= args.records:
                        done[flow] = now
                time.sleep(0.1)
        finally:
            for reader in readers.values():
                reader.close()
            mm2.stop()
    mb = args.records * args.size / 1e6
    print(f"MirrorMaker 2, {args.records} records of {args.size} bytes each way, {args.partitions} partitions")
    for flow in flows:
        copy_s = done[flow] - first[flow]
        print(f"  {flow}: first record {first[flow] - started:.1f} s after start, copied in {copy_s:.1f} s: "
              f"{args.records / copy_s:,.0f} records/s, {mb / copy_s:.1f} MB/s")


if __name__ == "__main__":
    main()
