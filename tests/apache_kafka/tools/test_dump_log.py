"""kafka-dump-log (DumpLogSegments, Kafka 3.9) on every file odradek writes, and odradek's own ``dump-log`` on
Kafka's files and odradek's, compared line for line with Kafka's tool on the same file; the checkpoint files, which no
Kafka tool prints, are checked against Kafka's text format beside the same files of Kafka's broker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tools_support import DUMP_LOG, Pair

from kafka_clients import opened
from odradek.apache_kafka import KAFKA_3, run_tool

SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


def _traffic(bootstrap: str, topic: str) -> None:
    """Rolled segments with index entries, an aborted and a committed transaction, and a group's commit."""
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "2048", "index.interval.bytes": "256"})
                         ])[topic].result(60)
    producer = opened(Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}))
    for i in range(120):
        producer.produce(topic, key=f"k{i % 7}".encode(), value=f"value-{i:04d}-{'x' * 20}".encode())
        if i % 10 == 9:
            producer.flush(30)
    assert producer.flush(30) == 0
    txn = opened(Producer({"bootstrap.servers": bootstrap, "transactional.id": f"txn-{topic}"}))
    txn.init_transactions(60)
    for commit in (False, True):
        txn.begin_transaction()
        txn.produce(topic, key=b"t", value=b"in a transaction")
        txn.flush(30)
        (txn.commit_transaction if commit else txn.abort_transaction)(60)
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                "isolation.level": "read_committed"}))
    consumer.subscribe([topic])
    seen = 0
    while seen < 121:
        msg = consumer.poll(30)
        assert msg is not None and not msg.error()
        seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()


@pytest.fixture(scope="module")
def written(pair: Pair) -> str:
    topic = "t-dump-log"
    _traffic(pair.kafka, topic)
    _traffic(pair.odradek, topic)
    return topic


def _files(log_dir: Path, topic: str) -> list[Path]:
    """The segment files of the topic and of every internal partition (offsets and transactions) that has data."""
    dirs = [log_dir / f"{topic}-0", *sorted(log_dir.glob("__consumer_offsets-*")),
            *sorted(log_dir.glob("__transaction_state-*"))]
    return [f for d in dirs for f in sorted(d.iterdir()) if f.suffix in SEGMENT_FILES
            and (d.name.startswith(topic) or f.stat().st_size > 0)]


def _kafka_dump(*args: str) -> subprocess.CompletedProcess[str]:
    return run_tool(KAFKA_3, DUMP_LOG, *args, timeout=300)


def test_kafka_dump_log_decodes_every_file_odradek_writes(pair: Pair, written: str) -> None:
    files = _files(pair.odradek_log_dir, written)
    suffixes = {f.suffix for f in files}
    assert {".log", ".index", ".timeindex", ".txnindex"} <= suffixes, suffixes
    result = _kafka_dump("--deep-iteration", "--print-data-log", "--index-sanity-check",
                         "--files", ",".join(map(str, files)))
    assert result.returncode == 0, result.stderr
    for f in files:
        assert f"Dumping {f}" in result.stdout
    for bad in ("Exception", "isvalid: false", "Mismatches", "is corrupt", "Found timestamp mismatch",
                "Found out of order"):
        assert bad not in result.stdout + result.stderr, bad
    assert "| offset: " in result.stdout and "abortedTxnList" not in result.stderr


def test_kafka_decoders_read_odradeks_offsets_and_transaction_logs(pair: Pair, written: str) -> None:
    logs = [f for f in _files(pair.odradek_log_dir, written) if f.suffix == ".log"]
    offsets = [str(f) for f in logs if f.parent.name.startswith("__consumer_offsets")]
    txns = [str(f) for f in logs if f.parent.name.startswith("__transaction_state")]
    assert offsets and txns
    decoded = _kafka_dump("--offsets-decoder", "--files", ",".join(offsets))
    assert decoded.returncode == 0 and "Exception" not in decoded.stdout + decoded.stderr, decoded.stderr
    assert f'"group":"g-{written}"' in decoded.stdout and '"protocolType":"consumer"' in decoded.stdout
    decoded = _kafka_dump("--transaction-log-decoder", "--files", ",".join(txns))
    assert decoded.returncode == 0 and "Exception" not in decoded.stdout + decoded.stderr, decoded.stderr
    assert f"transaction_metadata::transactionalId=txn-{written} payload: producerId:" in decoded.stdout


@pytest.mark.parametrize("broker", ["kafka", "odradek"])
def test_odradek_dump_log_prints_what_kafka_prints(pair: Pair, written: str, broker: str) -> None:
    log_dir = pair.kafka_log_dir if broker == "kafka" else pair.odradek_log_dir
    files = [f for f in sorted((log_dir / f"{written}-0").iterdir()) if f.suffix in (".log", ".index", ".timeindex")]
    if broker == "kafka":  # not Kafka's active segment: its preallocated time index draws Kafka's own mismatch line
        active = max(f.stem for f in files)
        files = [f for f in files if f.stem != active]
    args = ("--deep-iteration", "--print-data-log", "--files", ",".join(map(str, files)))
    kafka = _kafka_dump(*args)
    ours = subprocess.run([sys.executable, "-m", "odradek", "dump-log", *args], capture_output=True, text=True,
                          timeout=300)
    assert kafka.returncode == 0, kafka.stderr
    assert (ours.returncode, ours.stdout.splitlines()) == (0, kafka.stdout.splitlines())


CHECKPOINT_FIELDS = {"replication-offset-checkpoint": 3, "recovery-point-offset-checkpoint": 3,
                     "log-start-offset-checkpoint": 3, "cleaner-offset-checkpoint": 3, "leader-epoch-checkpoint": 2}


def _checkpoint_shape(path: Path) -> tuple[str, int]:
    """Kafka's CheckpointFile text: a version line (0), a count, that many entries of a fixed number of fields."""
    lines = path.read_text().splitlines()
    if not lines:  # Kafka creates its broker-wide checkpoints empty and writes them on its own schedule
        return "", CHECKPOINT_FIELDS[path.name]
    version, count, *entries = lines
    assert int(count) == len(entries), path
    widths = {len(e.split(" ")) for e in entries}
    assert widths <= {CHECKPOINT_FIELDS[path.name]}, (path, widths)
    return version, CHECKPOINT_FIELDS[path.name]


def test_checkpoint_files_have_kafkas_format(pair: Pair, written: str) -> None:
    ours = [p for p in pair.odradek_log_dir.iterdir() if p.name in CHECKPOINT_FIELDS]
    ours.append(pair.odradek_log_dir / f"{written}-0" / "leader-epoch-checkpoint")
    assert {p.name for p in ours} >= {"replication-offset-checkpoint", "recovery-point-offset-checkpoint",
                                     "log-start-offset-checkpoint", "leader-epoch-checkpoint"}
    for path in ours:
        theirs = pair.kafka_log_dir / path.relative_to(pair.odradek_log_dir)
        assert theirs.exists(), theirs
        ours_shape, their_shape = _checkpoint_shape(path), _checkpoint_shape(theirs)
        assert ours_shape == ("0", CHECKPOINT_FIELDS[path.name])
        assert their_shape in (ours_shape, ("", ours_shape[1]))
    topic_line = next(line for line in (pair.odradek_log_dir / "replication-offset-checkpoint").read_text()
                      .splitlines() if line.startswith(f"{written} "))
    assert topic_line == f"{written} 0 124"  # 120 records, 2 transactional ones and their 2 markers
