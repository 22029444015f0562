"""One nemesis run: a lab, two topics under load, a schedule of faults, every fault healed, the log read back and
checked. Used by the CI test (a fixed seed, every fault kind once), ``make lab ARGS=run`` and bench/nemesis.py.

The topics are the two contracts the checker knows: ``lossless`` (RF 3, min.insync.replicas=2, unclean election
off, an idempotent acks=all producer) and ``leader-acks`` (RF 3, min.insync.replicas=1, an acks=1 producer); a
consumer group reads both and commits as it goes. The nemesis's ``leader:<p>`` targets are leaders of ``lossless``.

With ``transactional=True`` a third workload runs beside them (:mod:`odradek.lab.transactional`): an idempotent
producer feeds ``txn-input``, a consume-transform-produce stage copies it into ``txn-output`` in transactions (some
aborted on purpose), a read_committed reader follows the output, and the nemesis's ``coordinator`` target is the
broker leading the stage's ``__transaction_state`` partition.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from odradek.admin import create_topic
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.lab.batches import read_batches
from odradek.lab.checker import ACKS_ALL_IDEMPOTENT, ACKS_ONE, EXACTLY_ONCE, FaultWindow, History, Report, check
from odradek.lab.cluster import Lab
from odradek.lab.nemesis import Fault, FaultEvent, Nemesis, draw, format_schedule
from odradek.lab.processes import wait_until
from odradek.lab.transactional import CommittedReaders, TransformStage, wait_caught_up
from odradek.lab.workload import GroupConsumers, ProducerWorkload, read_final
from odradek.placement.java import coordinator_partition

__all__ = ["LOSSLESS", "TXN_INPUT", "TXN_OUTPUT", "NemesisRun", "run"]

LOSSLESS, LEADER_ACKS = "lossless", "leader-acks"
TXN_INPUT, TXN_OUTPUT = "txn-input", "txn-output"
TXN_ID = TXN_GROUP = "lab-transform"
TXN_STATE_PARTITIONS = 50
PARTITIONS = 3


@dataclass
class NemesisRun:
    seed: int
    schedule: str
    events: list[FaultEvent]
    report: Report
    started: float
    seconds: float
    base_dir: Path
    transform: TransformStage | None = None

    def summary(self) -> str:
        healed = sum(e.healthy is not None for e in self.events)
        return (f"seed {self.seed}: {len(self.events)} faults ({healed} healed to full ISR in time), "
                f"{self.report.records_checked} acknowledged records checked, "
                f"{len(self.report.anomalies())} anomalies, {self.seconds:.0f}s"
                + (f"; {self.transform.summary()}" if self.transform else ""))


def _caught_up(history: History, topics: list[str]) -> bool:
    """The group has read at or past every acknowledged offset of the lossless ``topics`` it reads (before it
    stops, so its last reads count; acks=1's lost offsets may never come)."""
    read: dict[tuple[str, int], int] = {}
    for r in list(history.reads):
        read[(r.topic, r.partition)] = max(read.get((r.topic, r.partition), -1), r.offset)
    return all(read.get((a.topic, a.partition), -1) >= a.offset for a in list(history.acks)
               if a.topic in topics and history.semantics[a.topic].lossless)


def sequence_refusals(base_dir: Path, limit: int = 40) -> list[str]:
    """The brokers' log lines refusing a produce for its producer state (OUT_OF_ORDER_SEQUENCE_NUMBER and the
    like): beside a duplicate they say whether the client had a reason to start a new producer session."""
    out = []
    for path in sorted(base_dir.glob("broker*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if "refused" in line and ("sequence" in line or "producer" in line.lower()):
                out.append(f"{path.stem}: {line}")
    return out[:limit]


def run(seed: int, faults: int | None = None, *, hold_s: tuple[float, float] = (4.0, 7.0), rate: float = 150.0,
        base_dir: Path | None = None, say: Callable[[str], None] = print, transactional: bool = False,
        schedule: list[Fault] | None = None) -> NemesisRun:
    """``faults=None``: every fault kind once, in the seed's order; ``schedule``: exactly these faults."""
    if schedule is None:
        schedule = draw(seed, faults, partitions=PARTITIONS, brokers=3, hold_s=hold_s)
    text = format_schedule(seed, schedule)
    say(text)
    t0 = time.time()
    topics = {LOSSLESS: PARTITIONS, LEADER_ACKS: PARTITIONS}
    semantics = {LOSSLESS: ACKS_ALL_IDEMPOTENT, LEADER_ACKS: ACKS_ONE}
    min_isrs = {LOSSLESS: "2", LEADER_ACKS: "1"}
    if transactional:
        topics |= {TXN_INPUT: PARTITIONS, TXN_OUTPUT: PARTITIONS}
        semantics |= {TXN_INPUT: ACKS_ALL_IDEMPOTENT, TXN_OUTPUT: EXACTLY_ONCE}
        min_isrs |= {TXN_INPUT: "2", TXN_OUTPUT: "2"}
    history = History(semantics, dict(topics), started=t0)
    stage: TransformStage | None = None
    with Lab(base_dir=base_dir) as lab:
        say(f"lab: {lab.describe()} (logs in {lab.base_dir})")
        with KafkaConnection(lab.bootstrap) as conn:
            for topic, min_isr in min_isrs.items():
                error, message = create_topic(conn, topic, PARTITIONS, 3, {
                    "min.insync.replicas": min_isr, "unclean.leader.election.enable": "false"})
                if error not in (ErrorCode.none, ErrorCode.topic_already_exists):  # exists: our own retried request
                    raise RuntimeError(f"creating {topic}: {error.name} {message}")
        wait_until(lambda: lab.healthy(topics), 60, "both topics online with full ISRs")
        producers = [
            ProducerWorkload("p-all", lab.bootstrap, LOSSLESS, history, acks="all", idempotent=True, rate=rate),
            ProducerWorkload("p-one", lab.bootstrap, LEADER_ACKS, history, acks="1", idempotent=False,
                             rate=rate / 2),
        ]
        readers: CommittedReaders | None = None
        coordinator = None
        if transactional:
            producers.append(ProducerWorkload("p-in", lab.bootstrap, TXN_INPUT, history, acks="all", idempotent=True,
                                              rate=rate / 3))
            stage = TransformStage(lab.bootstrap, TXN_INPUT, TXN_OUTPUT, PARTITIONS, history, transactional_id=TXN_ID,
                                   group=TXN_GROUP, say=say)
            readers = CommittedReaders(lab.bootstrap, TXN_OUTPUT, PARTITIONS, history)
            coordinator = ("__transaction_state", coordinator_partition(TXN_ID, TXN_STATE_PARTITIONS))
        for p in producers:
            p.start()
        group_topics = [LOSSLESS, LEADER_ACKS]
        consumers = GroupConsumers(lab.bootstrap, "lab-group", group_topics, history).start()
        if stage is not None and readers is not None:
            stage.start()
            readers.start()
        try:
            wait_until(lambda: len(history.acks) >= 200, 60, "the workloads under way")
            if stage is not None:
                wait_until(lambda: stage is not None and stage.committed >= 3, 60, "transactions committing")
            events = Nemesis(lab, LOSSLESS, topics, say=say, coordinator=coordinator).run(schedule)
            wait_until(lambda: lab.healthy(topics), 90, "the cluster whole after the last fault")
            settle = len(history.acks) + 200
            wait_until(lambda: len(history.acks) >= settle, 60, "acknowledgements after the last fault")
        finally:
            for p in producers:
                p.stop()
            try:
                wait_until(lambda: _caught_up(history, group_topics), 60,
                           "the group reading every acknowledged record")
                if stage is not None:
                    wait_caught_up(lab.bootstrap, TXN_GROUP, TXN_INPUT, PARTITIONS)
            finally:
                consumers.stop()
                if stage is not None and readers is not None:
                    stage.stop()
                    readers.stop()
        plain = {t: n for t, n in topics.items() if t != TXN_OUTPUT}
        history.final_committed = consumers.final_committed({t: topics[t] for t in group_topics})
        history.final = read_final(lab.bootstrap, plain)
        if stage is not None:
            history.final |= read_final(lab.bootstrap, {TXN_OUTPUT: PARTITIONS}, read_committed=True)
        data_dirs = [lab.base_dir / f"broker{b}-data" for b in lab.brokers]
        history.batches = {(t, p): read_batches(data_dirs, t, p) for t, sem in semantics.items()
                           if sem is ACKS_ALL_IDEMPOTENT for p in range(topics[t])}
        history.faults = [FaultWindow(f"{e.fault.kind.value}: {e.resolved}", e.started, e.healed) for e in events]
        report = check(history)
        base = lab.base_dir
    result = NemesisRun(seed, text, events, report, t0, time.time() - t0, base, stage)
    say(report.format(t0))
    if any(t.duplicates or t.session_duplicates for t in report.topics):
        for line in sequence_refusals(base):
            say(f"  broker log: {line}")
    say(result.summary())
    return result
