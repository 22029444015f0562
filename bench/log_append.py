"""Log-layer throughput: leader appends and consumer reads straight against PartitionLog, no network.

The broker's produce and fetch paths add framing and sockets on top of this; these numbers bound what they can
reach. Batches are built once with records.encode_batch (1 KiB values, 16 records ≈ 16 KiB, librdkafka's default
batch size) and copied per append, since an append stamps its buffer in place.

    .venv/bin/python bench/log_append.py [--mb 512] [--fetch-bytes 1048576] [--dir /tmp/...]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from odradek.broker.log.partition_log import PartitionLog
from odradek.broker.topic_config import LogConfig
from odradek.clock import SystemClock
from odradek.protocol.records import encode_batch, validate_produce


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=512, help="megabytes to append and read back")
    parser.add_argument("--records-per-batch", type=int, default=16)
    parser.add_argument("--value-bytes", type=int, default=1024)
    parser.add_argument("--fetch-bytes", type=int, default=1 << 20, help="max_bytes of each read")
    parser.add_argument("--segment-bytes", type=int, default=256 << 20)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
    clock = SystemClock()
    try:
        config = LogConfig(segment_bytes=args.segment_bytes)
        log = PartitionLog.open(root / "bench-0", config, clock)
        template = encode_batch(
            [(None, b"x" * args.value_bytes, [])] * args.records_per_batch, timestamp_ms=clock.now_ms()
        )
        headers = validate_produce(template)
        batches = (args.mb << 20) // len(template)

        start = time.perf_counter()
        for _ in range(batches):
            log.append_as_leader(bytearray(template), headers, 0, clock.now_ms())
        append_s = time.perf_counter() - start
        total = batches * len(template)
        log.high_watermark = log.log_end_offset

        start = time.perf_counter()
        offset, read_bytes, reads = 0, 0, 0
        while offset < log.log_end_offset:
            result = log.read(offset, args.fetch_bytes, log.high_watermark, min_one=True)
            read_bytes += result.size
            reads += 1
            # the next offset follows the last batch: its header sits at the end of the buffer
            offset += (result.size // len(template)) * args.records_per_batch
        read_s = time.perf_counter() - start
        assert read_bytes == total, (read_bytes, total)

        start = time.perf_counter()
        log.flush()
        flush_s = time.perf_counter() - start
        log.close()

        start = time.perf_counter()
        reopened = PartitionLog.open(root / "bench-0", config, clock)
        recover_s = time.perf_counter() - start
        assert reopened.log_end_offset == batches * args.records_per_batch
        reopened.close()

        mb = total / (1 << 20)
        print(f"batch size        {len(template)} bytes, {batches} batches, {mb:.0f} MiB, "
              f"{len(reopened.segments)} segments")
        print(f"append            {mb / append_s:8.1f} MiB/s  {batches / append_s:9.0f} batches/s  "
              f"{batches * args.records_per_batch / append_s:10.0f} records/s")
        print(f"read ({args.fetch_bytes >> 10} KiB)   {mb / read_s:8.1f} MiB/s  {reads / read_s:9.0f} reads/s")
        print(f"fsync             {flush_s:8.2f} s")
        print(f"full recovery     {mb / recover_s:8.1f} MiB/s  ({recover_s:.2f} s: CRC of every batch)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
