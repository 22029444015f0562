"""Long nemesis runs (issue 15): for each seed, a lab of three ZooKeeper servers and three brokers on their own
network namespaces, ``--faults`` faults drawn from the seed, the checker's report, and one summary table at the end
(faults, faults healed to full ISRs, acknowledged records checked, acks=1 losses, anomalies, unavailability,
recovery times). Needs root. Exit status 1 if any run found an anomaly.

    .venv/bin/python bench/nemesis.py --seeds 11,12,13 --faults 25
    .venv/bin/python bench/nemesis.py --seeds 21,22 --faults 20 --transactional
    .venv/bin/python bench/nemesis.py --seeds 2,2,2 --transactional \
        --schedule kill-broker/coordinator/5,isolate-broker/leader:0/5,pause-broker/broker:1/5

``--schedule`` replaces the drawn faults by these (``kind/target/hold_s[/peer]``, comma-separated; the example is
tests/lab/test_lab_transactions.py's schedule), to rerun one schedule many times.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
from pathlib import Path

from odradek.lab.nemesis import Fault, Kind
from odradek.lab.netns import netns_available
from odradek.lab.run import LOSSLESS, TXN_OUTPUT, NemesisRun, run


def parse_schedule(text: str) -> list[Fault]:
    """``kind/target/hold_s[/peer]`` faults, comma-separated."""
    faults = []
    for part in text.split(","):
        kind, target, hold, *peer = part.strip().split("/")
        faults.append(Fault(Kind(kind), target, float(hold), int(peer[0]) if peer else 0))
    return faults


def _row(r: NemesisRun) -> str:
    lossless = next(t for t in r.report.topics if t.topic == LOSSLESS)
    others = [t for t in r.report.topics if not t.semantics.lossless]  # the acks=1 topic
    allowed_lost = sum(len(t.lost) + len(t.moved) for t in others)
    acked_others = sum(t.acked for t in others)
    recs = [x.after_start_s for x in r.report.recoveries[LOSSLESS] if x.after_start_s is not None]
    never = sum(x.after_start_s is None for x in r.report.recoveries[LOSSLESS])
    unavailable = sum(w.seconds for w in lossless.unavailable)
    healed = sum(e.healthy is not None for e in r.events)
    rec = f"{statistics.median(recs):.1f} / {max(recs):.1f}" if recs else "-"
    return (f"| {r.seed} | {len(r.events)} | {healed} | {lossless.acked:,} | {acked_others:,} | {allowed_lost} | "
            f"{len(r.report.anomalies())} | {unavailable:.0f} s of {r.seconds:.0f} s | {rec} | {never} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="11,12,13")
    parser.add_argument("--faults", type=int, default=25)
    parser.add_argument("--rate", type=float, default=150.0, help="acks=all records/s (acks=1 gets half)")
    parser.add_argument("--transactional", action="store_true",
                        help="add the consume-transform-produce stage (transactions, read_committed reader); "
                             "faults may then also strike its transaction coordinator")
    parser.add_argument("--schedule", default=None,
                        help="these faults instead of drawn ones: kind/target/hold_s[/peer],... (see above)")
    args = parser.parse_args()
    schedule = parse_schedule(args.schedule) if args.schedule else None
    reason = netns_available()
    if reason is not None:
        print(reason, file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING)
    results = []
    for seed in (int(s) for s in args.seeds.split(",")):
        base = Path(tempfile.mkdtemp(prefix=f"odradek-nemesis-{seed}-"))
        results.append(run(seed, args.faults, rate=args.rate, base_dir=base, transactional=args.transactional,
                           schedule=schedule))
        print(f"(logs of seed {seed} in {base})", flush=True)
    print("\n| seed | faults | healed to full ISR | acks=all acked | acks=1 acked | acks=1 lost (allowed) | anomalies "
          "| acks=all unavailable | recovery median / max (s) | never recovered |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(_row(r))
    for r in results:
        if r.transform is not None:
            print(f"seed {r.seed}: {r.transform.summary()}")
            out = next(t for t in r.report.topics if t.topic == TXN_OUTPUT)
            print(f"seed {r.seed}: {TXN_OUTPUT}: {out.acked:,} committed records, {out.aborted:,} aborted, "
                  f"{out.reads:,} read under read_committed, {out.in_doubt_seen} of in-doubt transactions kept")
    for r in results:
        for a in r.report.anomalies():
            print(f"seed {r.seed}: ANOMALY {a}")
    return 1 if any(r.report.anomalies() for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
