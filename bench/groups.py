"""Consumer-group coordinator costs, measured over the wire against a real ``odradek up`` broker.

    .venv/bin/python bench/groups.py            # writes nothing; prints a Markdown table

What it measures, one request at a time on one connection (so each figure is a full round trip: framing, kio
decode, coordinator, kio encode):

* Heartbeat round trips of a Stable single-member group.
* Rebalance cycles: the leader of a single-member Stable group rejoins (JoinGroup v9, which completes at once
  because every member is back) and syncs (SyncGroup v5, which waits until the assignment is committed to
  ``__consumer_offsets``).
* OffsetCommit v9 of 1 partition and of 100 partitions per request (each one appended and committed before the
  answer), with p50/p99 latency.
* Reload: after 100,000 offset records have been written, the broker is restarted and the time from its ready
  line to the first OffsetFetch answered without COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR is measured.
"""

from __future__ import annotations

import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kio.index import load_request_schema

from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

MS = datetime.timedelta(milliseconds=1)
TOPIC = "bench-groups"
PARTITIONS = 100


class Broker:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.bootstrap = ""
        self.ready_at = 0.0

    def start(self) -> None:
        ready = self.data_dir.parent / "ready"
        ready.unlink(missing_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "odradek",
            "up",
            "--schema-registry-port",
            "none",
            "--port",
            "0",
            "--data-dir",
            str(self.data_dir),
            "--ready-file",
            str(ready),
            "--override",
            "group.initial.rebalance.delay.ms=0",
        ]
        log = open(self.data_dir.parent / "broker.log", "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 60
        while not (ready.exists() and ready.read_text().startswith("bootstrap.servers=")):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("broker did not start")
            time.sleep(0.01)
        self.ready_at = time.monotonic()
        self.bootstrap = ready.read_text().strip().split("=", 1)[1]

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(60)


def nested(api: int, version: int, entity: str, **values: Any) -> Any:
    module = sys.modules[load_request_schema(api, version).__module__]
    return getattr(module, entity)(**values)


def request(api: int, version: int, **values: Any) -> Any:
    return load_request_schema(api, version)(**values)


def join(conn: KafkaConnection, group: str, member_id: str) -> Any:
    protocol = nested(11, 9, "JoinGroupRequestProtocol", name="range", metadata=b"\x00" * 32)
    body = request(
        11,
        9,
        group_id=group,
        session_timeout=30_000 * MS,
        rebalance_timeout=30_000 * MS,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(protocol,),
        reason=None,
    )
    return conn.request(11, body)


def sync(conn: KafkaConnection, group: str, generation: int, member_id: str) -> Any:
    assignment = nested(14, 5, "SyncGroupRequestAssignment", member_id=member_id, assignment=b"\x01" * 64)
    body = request(
        14,
        5,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(assignment,),
    )
    return conn.request(14, body)


def commit(conn: KafkaConnection, group: str, partitions: range, offset: int) -> Any:
    parts = tuple(
        nested(
            8,
            9,
            "OffsetCommitRequestPartition",
            partition_index=p,
            committed_offset=offset,
            committed_leader_epoch=-1,
            committed_metadata="",
        )
        for p in partitions
    )
    topic = nested(8, 9, "OffsetCommitRequestTopic", name=TOPIC, partitions=parts)
    body = request(
        8, 9, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=(topic,)
    )
    response = conn.request(8, body)
    assert all(p.error_code is ErrorCode.none for p in response.topics[0].partitions), response
    return response


def fetch_error(conn: KafkaConnection, group: str) -> ErrorCode:
    topic = nested(9, 7, "OffsetFetchRequestTopic", name=TOPIC, partition_indexes=(0,))
    return conn.request(9, request(9, 7, group_id=group, topics=(topic,), require_stable=False)).error_code


def timed(n: int, fn: Any) -> list[float]:
    samples = []
    for i in range(n):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
    return samples


def row(name: str, samples: list[float], per: int = 1) -> str:
    total = sum(samples)
    q = statistics.quantiles(samples, n=100)
    return (
        f"| {name} | {len(samples):,} | {len(samples) / total:,.0f} | {len(samples) * per / total:,.0f} | "
        f"{q[49] * 1e6:,.0f} | {q[98] * 1e6:,.0f} |"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = Broker(Path(tmp) / "data")
        broker.start()
        rows = []
        with KafkaConnection(broker.bootstrap, client_id="bench") as conn:
            topic = nested(
                19,
                4,
                "CreatableTopic",
                name=TOPIC,
                num_partitions=PARTITIONS,
                replication_factor=1,
                assignments=(),
                configs=(),
            )
            conn.request(19, request(19, 4, topics=(topic,), timeout=30_000 * MS, validate_only=False))
            fc = conn.request(10, request(10, 4, key_type=0, coordinator_keys=("bench",)))
            assert fc.coordinators[0].error_code is ErrorCode.none
            while True:  # the offsets topic's partitions load in the background after it is created
                first = join(conn, "bench", "")
                if first.error_code is not ErrorCode.coordinator_load_in_progress:
                    break
                time.sleep(0.01)
            joined = join(conn, "bench", first.member_id)
            member = joined.member_id
            sync(conn, "bench", joined.generation_id, member)

            def heartbeat(_: int) -> None:
                body = request(
                    12, 4, group_id="bench", generation_id=generation[0], member_id=member, group_instance_id=None
                )
                assert conn.request(12, body).error_code is ErrorCode.none

            generation = [joined.generation_id]
            rows.append(row("Heartbeat v4", timed(5_000, heartbeat)))

            def rebalance(_: int) -> None:
                result = join(conn, "bench", member)
                generation[0] = result.generation_id
                assert sync(conn, "bench", result.generation_id, member).error_code is ErrorCode.none

            rows.append(row("JoinGroup v9 + SyncGroup v5 (one rebalance)", timed(1_000, rebalance)))
            rows.append(row("OffsetCommit v9, 1 partition", timed(5_000, lambda i: commit(conn, "c1", range(1), i))))
            rows.append(
                row(
                    "OffsetCommit v9, 100 partitions",
                    timed(1_000, lambda i: commit(conn, "c100", range(PARTITIONS), i)),
                    per=PARTITIONS,
                )
            )
        broker.stop()

        broker.start()
        with KafkaConnection(broker.bootstrap, client_id="bench") as conn:
            while fetch_error(conn, "c100") in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator):
                time.sleep(0.005)
        reload_s = time.monotonic() - broker.ready_at
        broker.stop()

    print("| operation | requests | requests/s | offsets or beats/s | p50 µs | p99 µs |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(r)
    print()
    print(
        f"Reload after restart (about 106,000 offset records and 1,000 group records in __consumer_offsets): "
        f"{reload_s * 1000:,.0f} ms from the ready line to the first OffsetFetch answered."
    )
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
