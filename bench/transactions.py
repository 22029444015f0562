"""Transactional produce throughput beside non-transactional, on one odradek broker, in one run.

The shape Kafka's transactions design document measures (KIP-98: about 3% overhead): 1 KiB records, a producer
sending as fast as it can, one transaction committed every 100 ms. The baseline is the same producer without a
transactional.id but idempotent with acks=all (a transactional producer is both), so the difference is only the
transaction machinery: AddPartitionsToTxn when a transaction first touches a partition, EndTxn, the COMMIT markers
written to every partition, and the producer's flush before each commit. Modes alternate over several rounds so
the shared machine's drift hits both alike; the median of the rounds is reported.

    .venv/bin/python bench/transactions.py [--seconds 10] [--rounds 3] [--partitions 4]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

from confluent_kafka import Producer

from produce_consume import create_topic, run_broker  # the script's directory is on sys.path

VALUE = b"x" * 1024
TRANSACTION_MS = 100


def _producer(bootstrap: str, transactional_id: str | None) -> Producer:
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20,
    }
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
    return Producer(config)


def _send(producer: Producer, topic: str, failures: list[int]) -> None:
    def cb(err: object, _msg: object) -> None:
        if err is not None:
            failures[0] += 1

    while True:
        try:
            producer.produce(topic, VALUE, on_delivery=cb)
            return
        except BufferError:
            producer.poll(0.01)


def run(bootstrap: str, topic: str, seconds: float, transactional: bool, round_no: int) -> dict[str, float]:
    """Produce for ``seconds``; with ``transactional``, commit a transaction every TRANSACTION_MS."""
    producer = _producer(bootstrap, f"bench-txn-{round_no}" if transactional else None)
    if transactional:
        producer.init_transactions(30)
    failures = [0]
    sent = commits = 0
    flushing = committing = 0.0
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        if transactional:
            producer.begin_transaction()
        txn_end = min(end, time.perf_counter() + TRANSACTION_MS / 1000)
        while True:
            for _ in range(200):
                _send(producer, topic, failures)
            sent += 200
            producer.poll(0)
            if time.perf_counter() >= txn_end:
                break
        if transactional:
            before = time.perf_counter()
            producer.flush(60)  # commit_transaction would flush first anyway: timed apart from EndTxn
            flushed = time.perf_counter()
            producer.commit_transaction(60)  # EndTxn; the coordinator writes the markers to every partition
            flushing += flushed - before
            committing += time.perf_counter() - flushed
            commits += 1
    producer.flush(120)
    elapsed = time.perf_counter() - start
    return {"msg_s": sent / elapsed, "mb_s": sent * len(VALUE) / elapsed / 1e6, "failed": failures[0],
            "commits": commits, "txn_ms": elapsed * 1000 / commits if commits else 0.0,
            "flush_ms": flushing * 1000 / commits if commits else 0.0,
            "commit_ms": committing * 1000 / commits if commits else 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    results: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    with run_broker("odradek") as bootstrap:
        for round_no in range(args.rounds):
            for transactional in (False, True):
                topic = f"bench-{'txn' if transactional else 'plain'}-{round_no}"
                create_topic(bootstrap, topic, args.partitions)
                r = run(bootstrap, topic, args.seconds, transactional, round_no)
                results[transactional].append(r)
                kind = "transactional" if transactional else "idempotent"
                line = f"round {round_no} {kind:13s} {r['mb_s']:7.1f} MB/s {r['msg_s']:9,.0f} msg/s"
                line += f" failed={r['failed']:.0f}"
                if transactional:
                    line += (f" commits={r['commits']:.0f} ({r['txn_ms']:.0f} ms each, {r['flush_ms']:.0f} ms flushing,"
                             f" {r['commit_ms']:.0f} ms in EndTxn)")
                print(line, flush=True)
    plain = statistics.median(r["mb_s"] for r in results[False])
    txn = statistics.median(r["mb_s"] for r in results[True])
    print(f"median: idempotent {plain:.1f} MB/s, transactional {txn:.1f} MB/s, "
          f"overhead {100 * (plain - txn) / plain:.1f}%")


if __name__ == "__main__":
    main()
