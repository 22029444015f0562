"""Time Kafka's sticky assignors and replica placement on the largest shapes Kafka's own tests use.

Shapes (see ../shared/notes/java-anchors.md for Kafka's Java timings on this kind of machine):

* ``A1``  500 topics x 2,000 partitions (1M), 2,000 members, equal subscriptions, from scratch
* ``A2``  the rebalance after one member leaves A1 (eager: previous assignment in user data; cooperative: owned
  partitions and generation 1)
* ``B``   Kafka's non-equal shape: c0000-c1998 on all 500 topics, c1999 on t000 only
* ``B'``  member i subscribed to topics 0..(i % 500) (``Bprime`` on the command line)
* ``B-join``, ``Bprime-join``  a member subscribed to every topic joins B / B' (previous assignment kept); no Java
  timing exists for these, they exercise the rebalancing loop that the other shapes never need
* ``C``   AdminUtils placement of 100,000 partitions, RF 3, over 1,000 brokers without racks; ``C-racks`` in 10 racks

Only the ``assign`` call is timed (inputs, including user data, are built beforehand); each shape runs ``--repeat``
times (default 3, as Kafka's Java timings were) and the median is shown.  Each shape runs in its own process so
the peak RSS column is that shape's.  Usage::

    .venv/bin/python bench/assignors.py                 # every shape except the B' ones
    .venv/bin/python bench/assignors.py --shape A2      # one shape (B' with --shape Bprime, Bprime-join)
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from odradek.placement import (
    BrokerMetadata,
    CooperativeStickyAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    assign_replicas_to_brokers,
    encode_sticky_user_data,
)

N_TOPICS = 500
N_PARTITIONS = 2_000
N_MEMBERS = 2_000
JAVA_SECONDS = {
    ("A1", "sticky"): 0.14,
    ("A1", "cooperative-sticky"): 0.12,
    ("A2", "sticky"): 3.2,
    ("A2", "cooperative-sticky"): 1.8,
    ("B", "sticky"): 4.3,
    ("B", "cooperative-sticky"): 5.6,
    ("Bprime", "sticky"): 521.0,
    ("C", "adminutils"): 0.023,
    ("C-racks", "adminutils"): 0.049,
}
TARGET_SECONDS = {
    "A1": 1.0,
    "A2": None,
    "B": None,
    "Bprime": 30.0,
    "C": None,
    "C-racks": None,
}  # None: "no slower than Java" (A2, B) or "within 5x of Java" (C)


class _Timer:
    """Wall-clock and process CPU seconds of a block; CPU time is what other tenants of a shared machine distort
    least."""

    def __enter__(self) -> _Timer:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.times = (time.perf_counter() - self._wall, time.process_time() - self._cpu)


def _topics() -> dict[str, int]:
    return {f"t{i:03d}": N_PARTITIONS for i in range(N_TOPICS)}


def _members() -> list[str]:
    return [f"c{i:04d}" for i in range(N_MEMBERS)]


def _check(
    topics: dict[str, int],
    subs: dict[str, Subscription],
    result: dict[str, list[TopicPartition]],
    complete: bool = True,
) -> str:
    seen = set()
    total = 0
    for m, parts in result.items():
        topic_set = subs[m].topic_set
        for tp in parts:
            assert tp.topic in topic_set
        seen.update(parts)
        total += len(parts)
    assert total == len(seen), "a partition was assigned twice"
    if complete:
        assert total == sum(topics.values()), f"{total} of {sum(topics.values())} partitions assigned"
    sizes = [len(p) for p in result.values()]
    return f"sizes {min(sizes)}..{max(sizes)}"


def shape_a1(assignor_name: str) -> tuple[tuple[float, float], str]:
    topics = _topics()
    subs = {m: Subscription(list(topics)) for m in _members()}
    assignor = StickyAssignor() if assignor_name == "sticky" else CooperativeStickyAssignor()
    with _Timer() as timer:
        result = assignor.assign(topics, subs)
    return timer.times, _check(topics, subs, result)


def shape_a2(assignor_name: str) -> tuple[tuple[float, float], str]:
    topics = _topics()
    names = list(topics)
    members = _members()
    first = StickyAssignor().assign(topics, {m: Subscription(names) for m in members})
    gone = members[len(members) // 2]
    if assignor_name == "sticky":
        subs = {m: Subscription(names, user_data=encode_sticky_user_data(first[m], 1)) for m in members if m != gone}
        assignor: StickyAssignor | CooperativeStickyAssignor = StickyAssignor()
    else:
        subs = {m: Subscription(names, owned_partitions=first[m], generation_id=1) for m in members if m != gone}
        assignor = CooperativeStickyAssignor()
    with _Timer() as timer:
        result = assignor.assign(topics, subs)
    moved = sum(len(set(result[m]) - set(first[m])) for m in subs)
    detail = _check(topics, subs, result, complete=assignor_name == "sticky")
    return timer.times, f"{detail}; {moved} partitions moved (the leaver had {len(first[gone])})"


def shape_b(assignor_name: str) -> tuple[tuple[float, float], str]:
    topics = _topics()
    names = list(topics)
    members = _members()
    subs = {m: Subscription(names) for m in members[:-1]}
    subs[members[-1]] = Subscription([names[0]])
    assignor = StickyAssignor() if assignor_name == "sticky" else CooperativeStickyAssignor()
    with _Timer() as timer:
        result = assignor.assign(topics, subs)
    return timer.times, _check(topics, subs, result)


def shape_bprime(assignor_name: str) -> tuple[tuple[float, float], str]:
    topics = _topics()
    names = list(topics)
    subs = {m: Subscription(names[: i % N_TOPICS + 1]) for i, m in enumerate(_members())}
    assignor = StickyAssignor() if assignor_name == "sticky" else CooperativeStickyAssignor()
    with _Timer() as timer:
        result = assignor.assign(topics, subs)
    return timer.times, _check(topics, subs, result)


def _join(subscriptions: dict[str, list[str]], assignor_name: str) -> tuple[tuple[float, float], str]:
    """A member subscribed to every topic joins a group whose members report their previous assignment."""
    topics = _topics()
    first_subs = {m: Subscription(ts) for m, ts in subscriptions.items()}
    first = StickyAssignor().assign(topics, first_subs)
    subs: dict[str, Subscription]
    if assignor_name == "sticky":
        subs = {m: Subscription(ts, user_data=encode_sticky_user_data(first[m], 1)) for m, ts in subscriptions.items()}
        assignor: StickyAssignor | CooperativeStickyAssignor = StickyAssignor()
    else:
        subs = {m: Subscription(ts, owned_partitions=first[m], generation_id=1) for m, ts in subscriptions.items()}
        assignor = CooperativeStickyAssignor()
    subs["zz-joiner"] = Subscription(list(topics))
    with _Timer() as timer:
        result = assignor.assign(topics, subs)
    detail = _check(topics, subs, result, complete=assignor_name == "sticky")
    return timer.times, f"{detail}; the joiner got {len(result['zz-joiner'])}"


def shape_b_join(assignor_name: str) -> tuple[tuple[float, float], str]:
    names = list(_topics())
    members = _members()
    subscriptions = {m: names for m in members[:-1]}
    subscriptions[members[-1]] = names[:1]
    return _join(subscriptions, assignor_name)


def shape_bprime_join(assignor_name: str) -> tuple[tuple[float, float], str]:
    names = list(_topics())
    return _join({m: names[: i % N_TOPICS + 1] for i, m in enumerate(_members())}, assignor_name)


def shape_c(racks: bool) -> tuple[tuple[float, float], str]:
    brokers = [BrokerMetadata(i, f"rack{i % 10}" if racks else None) for i in range(1_000)]
    with _Timer() as timer:
        result = assign_replicas_to_brokers(100_000, 3, brokers, fixed_start_index=0)
    assert all(len(set(r)) == 3 for r in result.values())
    return timer.times, f"{len(result)} partitions"


SHAPES: dict[str, tuple[list[str], Callable[[str], tuple[tuple[float, float], str]]]] = {
    "A1": (["sticky", "cooperative-sticky"], shape_a1),
    "A2": (["sticky", "cooperative-sticky"], shape_a2),
    "B": (["sticky", "cooperative-sticky"], shape_b),
    "Bprime": (["sticky"], shape_bprime),
    "B-join": (["sticky", "cooperative-sticky"], shape_b_join),
    "Bprime-join": (["sticky", "cooperative-sticky"], shape_bprime_join),
    "C": (["adminutils"], lambda _a: shape_c(False)),
    "C-racks": (["adminutils"], lambda _a: shape_c(True)),
}


def run_one(shape: str, assignor: str, repeat: int) -> dict[str, object]:
    runs = [SHAPES[shape][1](assignor) for _ in range(repeat)]
    elapsed = statistics.median(r[0][0] for r in runs)
    cpu = statistics.median(r[0][1] for r in runs)
    detail = runs[-1][1] + (f"; wall runs {', '.join(f'{r[0][0]:.3f}' for r in runs)}" if repeat > 1 else "")
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "shape": shape,
        "assignor": assignor,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "rss_mib": rss_mib,
        "detail": detail,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), help="run one shape (default: all but Bprime)")
    parser.add_argument("--assignor", help="only this assignor (sticky, cooperative-sticky)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per shape; the median is reported (default 3)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.shape, args.assignor, args.repeat)))
        return
    shapes = [args.shape] if args.shape else [s for s in SHAPES if not s.startswith("Bprime")]
    rows = []
    for shape in shapes:
        for assignor in SHAPES[shape][0]:
            if args.assignor and assignor != args.assignor:
                continue
            command = [
                sys.executable,
                __file__,
                "--child",
                "--shape",
                shape,
                "--assignor",
                assignor,
                "--repeat",
                str(args.repeat),
            ]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            _print_row(rows[-1])


def _print_row(row: dict) -> None:  # type: ignore[type-arg]
    java = JAVA_SECONDS.get((row["shape"], row["assignor"]))
    ratio = f"cpu/java {row['cpu_seconds'] / java:6.2f}x" if java else "   -  "
    print(
        f"{row['shape']:8} {row['assignor']:19} wall {row['seconds']:7.3f} s  cpu {row['cpu_seconds']:7.3f} s  "
        f"java {java or 0:8.3f} s  {ratio}  "
        f"rss {row['rss_mib']:7.0f} MiB  {row['detail']}",
        flush=True,
    )


if __name__ == "__main__":
    main()
