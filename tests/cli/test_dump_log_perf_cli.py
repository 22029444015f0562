"""``odradek dump-log`` on segments a broker wrote (checked against what was produced) and the perf tools' output."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from click.testing import Result
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_clients import close_opened, opened
from odradek.cli.dump_log import dump_log
from odradek.protocol.compression import CODEC_GZIP
from odradek.protocol.records import encode_batch
from odradek.testing import ThreadedCluster, start_cluster

BATCH = re.compile(
    r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: (-?\d+) "
    r"producerId: (-?\d+) producerEpoch: (-?\d+) partitionLeaderEpoch: (\d+) isTransactional: false "
    r"isControl: false deleteHorizonMs: OptionalLong.empty position: (\d+) CreateTime: (\d+) size: (\d+) "
    r"magic: 2 compresscodec: (\w+) crc: (\d+) isvalid: (true|false)$")
RECORD = re.compile(
    r"\| offset: (\d+) CreateTime: (\d+) keySize: (-?\d+) valueSize: (-?\d+) sequence: (-?\d+) "
    r"headerKeys: \[([^\]]*)\](?: key: (\S+))? payload: (.*)$")


def test_dump_log_matches_what_was_produced(tmp_path: Path, cli: Callable[..., Result]) -> None:
    cluster = start_cluster(tmp_path, brokers=1)
    try:
        bootstrap = cluster.bootstrap
        admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
        admin.create_topics([NewTopic("dumped", 1, 1, config={"index.interval.bytes": "200"})])["dumped"].result(30)
        sent: list[tuple[str | None, str, int, list[str]]] = []
        for codec in ("none", "gzip"):
            producer = opened(Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": codec,
                                        "enable.idempotence": True}))
            for i in range(40):
                key = None if i % 10 == 9 else f"key-{i % 4}"
                value, ts = f"{codec} value {i}", 1_800_000_000_000 + len(sent)
                headers = [("trace", b"x")] if i % 5 == 0 else []
                producer.produce("dumped", value.encode(), key.encode() if key else None, timestamp=ts,
                                 headers=headers)
                sent.append((key, value, ts, [h for h, _v in headers]))
                if i % 7 == 6:
                    producer.flush(30)  # several batches per codec
            assert producer.flush(30) == 0
        close_opened()  # the clients go before their broker
        cluster.stop(0)  # a clean stop flushes the segment and its indexes
    finally:
        cluster.close()
    partition_dir = tmp_path / "broker-0" / "dumped-0"
    log = partition_dir / f"{0:020d}.log"

    result = cli("dump-log", "--files", str(log), "--print-data-log")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [BATCH.match(line) for line in lines if line.startswith("baseOffset:")]
    records = [RECORD.match(line) for line in lines if line.startswith("|")]
    assert all(batches) and all(records), "\n".join(lines)
    assert len(batches) + len(records) + 2 == len(lines)
    assert {b[12] for b in batches if b} == {"none", "gzip"}
    assert {b[14] for b in batches if b} == {"true"}
    position = 0
    for b in batches:
        assert b is not None and int(b[9]) == position  # each batch starts where the previous one ended
        position += int(b[11])
    assert position == log.stat().st_size

    assert len(records) == len(sent)
    for offset, (record, (key, value, ts, header_keys)) in enumerate(zip(records, sent, strict=True)):
        assert record is not None
        assert int(record[1]) == offset and int(record[2]) == ts
        assert int(record[3]) == (len(key) if key else -1) and int(record[4]) == len(value)
        assert record[6] == ",".join(header_keys) and record[7] == key and record[8] == value

    index = cli("dump-log", "--files", f"{partition_dir / f'{0:020d}.index'},"
                                       f"{partition_dir / f'{0:020d}.timeindex'}").stdout.splitlines()
    starts = {int(b[9]): (int(b[1]), int(b[2])) for b in batches if b}
    entries = [re.fullmatch(r"offset: (\d+) position: (\d+)", line) for line in index if line.startswith("offset:")]
    assert entries, index
    for entry in entries:
        assert entry is not None
        first, last = starts[int(entry[2])]  # the position is a batch's start, the offset within that batch
        assert first <= int(entry[1]) <= last
    times = [re.fullmatch(r"timestamp: (\d+) offset: (\d+)", line) for line in index if line.startswith("timestamp:")]
    assert times and all(t is not None and sent[int(t[2])][2] == int(t[1]) for t in times)


def test_dump_log_reports_a_bad_crc_and_trailing_bytes() -> None:
    good = encode_batch([(b"k", b"v", [])], base_offset=0, timestamp_ms=5)
    bad = bytearray(encode_batch([(None, b"payload", [])], base_offset=1, timestamp_ms=6, compression=CODEC_GZIP))
    bad[-1] ^= 0xFF
    lines = list(dump_log(bytes(good + bad) + b"\x00\x01\x02", 0, deep=False, print_data=False, name="x.log"))
    assert lines[1].endswith(f"compresscodec: none crc: {int.from_bytes(good[17:21], 'big')} isvalid: true")
    assert lines[2].endswith("isvalid: false") and "compresscodec: gzip" in lines[2]
    assert lines[3] == "Found 3 invalid bytes at the end of x.log"


def test_perf_produce_and_consume_print_as_kafka_tools(
    cluster: ThreadedCluster, cli: Callable[..., Result], name: str,
) -> None:
    produced = cli("perf", "produce", "--topic", name, "--num-records", "300", "--record-size", "100",
                   "--throughput", "-1", "--producer-props", f"bootstrap.servers={cluster.bootstrap}", "acks=all")
    assert produced.exit_code == 0, produced.output
    summary = produced.stdout.splitlines()[-1]
    assert re.fullmatch(
        r"300 records sent, \d+\.\d{6} records/sec \(\d+\.\d{2} MB/sec\), \d+\.\d{2} ms avg latency, "
        r"\d+\.\d{2} ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.", summary), summary

    consumed = cli("perf", "consume", "--bootstrap-server", cluster.bootstrap, "--topic", name, "--messages", "300",
                   "--timeout", "20000")
    assert consumed.exit_code == 0, consumed.output
    header, row = consumed.stdout.splitlines()
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                      "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    fields = row.split(", ")
    assert len(fields) == 10 and fields[4] == "300"
    assert float(fields[2]) == round(300 * 100 / 1024 / 1024, 4)
