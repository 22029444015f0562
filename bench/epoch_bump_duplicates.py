"""How often librdkafka writes records twice across an epoch bump, against odradek (issue 15's open anomaly).

Runs the scenario of tests/epoch_bump.py N times, each on a fresh in-process three-broker cluster: a Produce
response lost on partition 0's leader (the broker wrote the batch; the client cannot know) while partition 1's
records reach message.timeout.ms, which makes librdkafka drain and bump its epoch; then the proxy heals. Per run it
prints the records sent and acknowledged, the sends reported failed, each record found twice with the producer id,
epoch and sequence of both copies, the lab checker's verdict, and librdkafka's debug lines that show the bump.
``--no-bump`` runs the control: the same lost response, healed at once, no timeouts.

    PYTHONPATH=src .venv/bin/python bench/epoch_bump_duplicates.py              # 5 runs
    PYTHONPATH=src .venv/bin/python bench/epoch_bump_duplicates.py --runs 20 --records 50
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import confluent_kafka  # noqa: E402

from epoch_bump import reproduce  # noqa: E402

BUMP_LINES = ("drain before retrying", "timed out", "epoch bump", "bumped epoch", "changed PID{Id")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=20, help="records in the batch whose response is lost")
    parser.add_argument("--message-timeout-ms", type=int, default=5000)
    parser.add_argument("--gap", type=float, default=3.0, help="seconds between the two partitions' sends")
    parser.add_argument("--no-bump", action="store_true", help="the control: no timeouts, so no epoch bump")
    args = parser.parse_args()
    print(f"confluent-kafka {confluent_kafka.version()}, librdkafka {confluent_kafka.libversion()[0]}; "
          f"Python {platform.python_version()}; {args.runs} runs, {args.records} records in the lost batch, "
          f"message.timeout.ms={args.message_timeout_ms}, gap {args.gap}s{', no bump' if args.no_bump else ''}")
    totals = {"sent": 0, "acked": 0, "failed": 0, "duplicates": 0, "same session": 0, "anomalies": 0}
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="epoch-bump-") as tmp:
            started = time.monotonic()
            out = reproduce(Path(tmp), records=args.records, message_timeout_ms=args.message_timeout_ms,
                            gap_s=args.gap, bump=not args.no_bump)
            took = time.monotonic() - started
        assert out.report is not None
        dups, same = out.duplicates, out.same_session_duplicates()
        anomalies = out.report.anomalies()
        print(f"\nrun {run} ({took:.1f}s): sent {out.sent}, acknowledged {out.acked}, failed "
              f"{sum(out.failed.values())} {out.failed or ''} (by partition: {out.failed_in}); broker 0 wrote "
              f"{out.written_before_heal} records whose response was lost; bumped to {out.bumped_to}; duplicates "
              f"{len(dups)} ({len(same)} under one session); checker: {len(anomalies)} anomalies, "
              f"{len(out.report.topics[0].session_duplicates)} allowed as a new producer session")
        for value, copies in sorted(dups.items(), key=lambda kv: kv[1][0].offset):
            print(f"  {value.decode()}: " + "  |  ".join(
                f"offset {c.offset} (id {c.batch.producer_id}, epoch {c.batch.producer_epoch}, "
                f"seq {c.batch.sequence_of(c.offset)})" for c in copies))
        for line in out.client_lines:
            if any(k in line for k in BUMP_LINES):
                print(f"  librdkafka: {line}")
        for a in anomalies:
            print(f"  ANOMALY: {a}")
        totals["sent"] += out.sent
        totals["acked"] += out.acked
        totals["failed"] += sum(out.failed.values())
        totals["duplicates"] += len(dups)
        totals["same session"] += len(same)
        totals["anomalies"] += len(anomalies)
    print("\n| runs | sent | acknowledged | failed (timed out) | written twice | of them under one session | "
          "checker anomalies |")
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.runs} | {totals['sent']} | {totals['acked']} | {totals['failed']} | {totals['duplicates']} | "
          f"{totals['same session']} | {totals['anomalies']} |")
    return 1 if totals["same session"] or totals["anomalies"] else 0


if __name__ == "__main__":
    sys.exit(main())
