"""Several log directories through real clients: DescribeLogDirs and AlterReplicaLogDirs with kafka-python's
admin client, a replica moved between directories while a producer keeps writing, nothing lost."""

from __future__ import annotations

import threading
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import LogDirNotFoundError, NoError

from brokers import wait_for

TOPIC = "jbod"


def _dirs_of(admin: KafkaAdminClient) -> dict[str, dict[int, dict]]:
    """log dir → partition of TOPIC → its description, from the broker's DescribeLogDirs answer."""
    (answer,) = admin.describe_log_dirs()
    out: dict[str, dict[int, dict]] = {}
    for result in answer["log_dirs"]:
        assert result["error_code"] == 0
        parts = out.setdefault(result["log_dir"], {})
        for topic in result["topics"]:
            if topic["name"] == TOPIC:
                for p in topic["partitions"]:
                    parts[p["partition_index"]] = p
    return out


def test_replica_moves_between_log_dirs_under_load(broker_factory, tmp_path):
    a, b = tmp_path / "disk-a", tmp_path / "disk-b"
    broker = broker_factory("--override", f"log.dirs={a},{b}")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(TOPIC, 4, 1)])
    dirs = wait_for(lambda: (d := _dirs_of(admin)) and sum(len(p) for p in d.values()) == 4 and d,
                    what="four partitions described")
    assert len(dirs) == 2 and sorted(len(p) for p in dirs.values()) == [2, 2]  # fewest-partitions placement
    assert all(path.startswith(str(a)) or path.startswith(str(b)) for path in dirs)
    source = next(path for path, parts in dirs.items() if 0 in parts)
    destination = next(path for path in dirs if path != source)

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=1000, linger_ms=5,
                             enable_idempotence=True)
    acked: list[int] = []
    stop = threading.Event()

    def produce() -> None:
        n = 0
        while not stop.is_set():
            futures = [(i, producer.send(TOPIC, value=str(i).encode(), partition=0)) for i in range(n, n + 200)]
            n += 200
            for i, f in futures:
                f.get(timeout=30)
                acked.append(i)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    wait_for(lambda: len(acked) >= 1000, what="data before the move")

    tpr = (TOPIC, 0, 0)
    assert admin.alter_replica_log_dirs({tpr: destination}) == {tpr: NoError}
    assert admin.alter_replica_log_dirs({(TOPIC, 1, 0): str(tmp_path / "nowhere")}) == {
        (TOPIC, 1, 0): LogDirNotFoundError}
    moved_at = len(acked)
    wait_for(lambda: 0 in _dirs_of(admin)[destination] and 0 not in _dirs_of(admin)[source]
             and not _dirs_of(admin)[destination][0]["is_future_key"], what="the move completed")
    wait_for(lambda: len(acked) >= moved_at + 1000, what="writes after the move")
    stop.set()
    writer.join(60)
    producer.close()
    assert not writer.is_alive()

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=5000)
    consumer.assign([TopicPartition(TOPIC, 0)])
    seen = [int(m.value) for m in consumer]
    consumer.close()
    assert sorted(set(seen)) == sorted(acked) and len(seen) == len(acked)  # nothing lost, nothing doubled
    admin.close()
    assert not (Path(source) / f"{TOPIC}-0").exists() and (Path(destination) / f"{TOPIC}-0").is_dir()
