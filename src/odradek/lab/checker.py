"""The checker: what the clients were told and saw during a run, judged against Kafka's documented guarantees.

Pure code over a :class:`History` (no clock, no sockets), so every rule is unit-tested on hand-made histories.

What each workload may and may not do is its :class:`Semantics`, Kafka's documented contract for that producer
configuration:
- an idempotent producer with ``acks=all`` on a topic with ``min.insync.replicas=2`` and unclean election off
  must lose no acknowledged record, write none twice, and keep each partition in the order it sent;
- a producer with ``acks=1`` is acknowledged by the leader alone, so a leader cut off before its followers copied
  a record loses it (the record is truncated when the old leader rejoins as a follower): allowed, and counted;
  without idempotence its retries may also write a record twice or reorder it (counted).
- an idempotent producer's guarantee holds within one producer session (producer id and epoch, KIP-98): a record
  written twice under one session is the broker's fault (an anomaly), but copies under different sessions are the
  client sending it again after starting a new one, which no broker can recognise. librdkafka does that: when it
  bumps its epoch (after records of some partition time out or get OUT_OF_ORDER_SEQUENCE_NUMBER; an idempotent
  producer bumps it itself, same id, epoch + 1) it re-sends under the new epoch the records whose response it lost,
  which were written already (confluentinc/librdkafka#4953, which notes it happens against Kafka too; reproduced by
  tests/lab/test_lab_epoch_bump.py). Those are counted apart, as allowed, with the sessions of each copy;
  so are the reorderings the second copies make. Telling them apart needs :attr:`History.batches`, the batch
  headers of the final log (:mod:`odradek.lab.batches`); without them every duplicate counts against the broker.
- a transactional consume-transform-produce stage read with ``isolation.level=read_committed``
  (:data:`EXACTLY_ONCE`, checked by :func:`_check_transform`): every record of a committed transaction stays where
  the commit put it; a record of an aborted transaction, or of none, read under read_committed is an anomaly; each
  input record appears in the output exactly once; each input partition's records keep their order in the output.
  A transaction whose outcome the client never learned (a commit that failed, a client abandoned while stuck) is
  in doubt: its records may be seen or not, and are counted.

A record's value is ``<producer>:<sequence>``, which is how order and duplicates are told apart from lookalikes; a
transformed record's is ``<input value>/<transaction number>``, so two attempts at one input are told apart.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field, replace

from odradek.lab.batches import Batch

__all__ = [
    "ACKS_ALL_IDEMPOTENT", "ACKS_ONE", "EXACTLY_ONCE", "Ack", "Assignment", "Commit", "FaultWindow", "History", "Read",
    "Report", "Semantics", "TopicReport", "Window", "check",
]


LEAD_S, TRAIL_S = 1.0, 5.0  # how far before a fault and after its heal a loss is attributed to it
TXN_GAP_S = 3.0  # a transform committing nothing this long is unavailable (its transactions are bursty)


@dataclass(frozen=True)
class Semantics:
    name: str
    lossless: bool  # no acknowledged record may be lost
    no_duplicates: bool
    ordered: bool  # each producer's records keep their order within a partition
    read_committed: bool = False  # a record read must have been acknowledged (transactions)


ACKS_ALL_IDEMPOTENT = Semantics("acks=all, idempotent, min.insync.replicas=2", True, True, True)
ACKS_ONE = Semantics("acks=1, not idempotent", False, False, False)
EXACTLY_ONCE = Semantics("transactional consume-transform-produce, read_committed", True, True, True, True)


@dataclass(frozen=True)
class Ack:
    """A record the producer was told is written: at ``partition``/``offset``, sent at ``sent``, acked at ``at``."""

    topic: str
    partition: int
    offset: int
    value: bytes
    sent: float
    at: float


@dataclass(frozen=True)
class Read:
    consumer: str
    topic: str
    partition: int
    offset: int
    value: bytes


@dataclass(frozen=True)
class Commit:
    """An offset commit the coordinator acknowledged (the next offset to read)."""

    consumer: str
    topic: str
    partition: int
    offset: int
    at: float


@dataclass(frozen=True)
class Assignment:
    """A consumer given a partition at ``at``, and the offset of the first record it then read there."""

    consumer: str
    topic: str
    partition: int
    first_offset: int
    at: float


@dataclass(frozen=True)
class FaultWindow:
    name: str
    started: float
    healed: float


@dataclass
class History:
    semantics: dict[str, Semantics]  # topic -> its workload's contract
    partitions: dict[str, int]
    acks: list[Ack] = field(default_factory=list)
    failed_sends: dict[str, int] = field(default_factory=dict)  # topic -> deliveries reported failed (not acked)
    reads: list[Read] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    assignments: list[Assignment] = field(default_factory=list)
    final_committed: dict[tuple[str, int], int] = field(default_factory=dict)  # the group's offsets at the end
    final: dict[tuple[str, int], list[tuple[int, bytes]]] = field(default_factory=dict)  # every partition's log
    faults: list[FaultWindow] = field(default_factory=list)
    started: float = 0.0
    # Transactional stages: output topic -> input topic. A committed transaction's records are ``acks`` (sent: the
    # transaction's start, at: its commit); aborted and in-doubt ones are here, by output topic.
    transforms: dict[str, str] = field(default_factory=dict)
    aborted: dict[str, set[bytes]] = field(default_factory=dict)
    in_doubt: dict[str, set[bytes]] = field(default_factory=dict)
    # (topic, partition) -> offset -> the batch holding it (producer id, epoch, sequence), read from the final log
    batches: dict[tuple[str, int], dict[int, Batch]] = field(default_factory=dict)


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    partitions: tuple[int, ...]

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class TopicReport:
    topic: str
    semantics: Semantics
    acked: int = 0
    failed_sends: int = 0
    in_log: int = 0
    reads: int = 0
    lost: list[str] = field(default_factory=list)
    lost_during: dict[str, int] = field(default_factory=dict)  # fault (or "no fault") -> lost or moved records acked
    moved: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    # copies of one record under different producer sessions (a client re-send: allowed), with the reorderings
    # their later copies make
    session_duplicates: list[str] = field(default_factory=list)
    session_reorderings: int = 0
    order_violations: list[str] = field(default_factory=list)
    vanished_reads: list[str] = field(default_factory=list)
    unacked_reads: list[str] = field(default_factory=list)
    unavailable: list[Window] = field(default_factory=list)
    inputs_missing: list[str] = field(default_factory=list)  # a transform's input never in its output
    aborted: int = 0  # a transform's records in aborted transactions
    in_doubt_seen: int = 0  # a transform's records of in-doubt transactions that are in the output

    def anomalies(self) -> list[str]:
        """Everything this workload's contract forbids."""
        s = self.semantics
        out: list[str] = []
        if s.lossless:
            out += [f"{self.topic}: acknowledged record lost: {x}" for x in self.lost]
            out += [f"{self.topic}: acknowledged record moved: {x}" for x in self.moved]
        if s.no_duplicates:
            out += [f"{self.topic}: duplicate: {x}" for x in self.duplicates]
        if s.ordered:
            out += [f"{self.topic}: order violation: {x}" for x in self.order_violations]
        if s.read_committed:
            out += [f"{self.topic}: read under read_committed but never committed: {x}" for x in self.unacked_reads]
            out += [f"{self.topic}: input never in the output: {x}" for x in self.inputs_missing]
        out += [f"{self.topic}: a read record later vanished: {x}" for x in self.vanished_reads]
        return out

    def allowed(self) -> list[str]:
        """What happened that the contract allows, counted (acks=1's losses)."""
        s = self.semantics
        out = []
        if not s.lossless and (self.lost or self.moved):
            out.append(f"{self.topic}: {len(self.lost)} acknowledged records lost, {len(self.moved)} moved "
                       f"(allowed by {s.name})")
        if not s.no_duplicates and self.duplicates:
            out.append(f"{self.topic}: {len(self.duplicates)} duplicates (allowed by {s.name})")
        if not s.ordered and self.order_violations:
            out.append(f"{self.topic}: {len(self.order_violations)} reorderings (allowed by {s.name})")
        if self.session_duplicates:
            out.append(f"{self.topic}: {len(self.session_duplicates)} records written again under a new producer "
                       f"session ({self.session_reorderings} reorderings with them): allowed, an idempotent "
                       "producer's guarantee holds per producer id and epoch; librdkafka re-sends records whose "
                       "response it lost under a new epoch when it bumps one (confluentinc/librdkafka#4953)")
            out += [f"{self.topic}:   {x}" for x in self.session_duplicates[:5]]
        if self.in_doubt_seen:
            out.append(f"{self.topic}: {self.in_doubt_seen} records of transactions whose outcome the client never "
                       f"learned are in the output (a commit that went through)")
        return out


@dataclass
class Recovery:
    fault: str
    after_start_s: float | None  # until every partition acked a record sent after the fault began; None: never
    after_heal_s: float | None


@dataclass
class Report:
    topics: list[TopicReport]
    offsets_backwards: list[str]
    recoveries: dict[str, list[Recovery]]  # topic -> one per fault

    def anomalies(self) -> list[str]:
        out = [a for t in self.topics for a in t.anomalies()]
        return out + [f"consumer offset went backwards: {x}" for x in self.offsets_backwards]

    @property
    def records_checked(self) -> int:
        return sum(t.acked for t in self.topics)

    def format(self, started: float = 0.0) -> str:
        lines = []
        for t in self.topics:
            readers = "read under read_committed" if t.semantics.read_committed else "read by the group"
            lines.append(f"{t.topic} [{t.semantics.name}]: {t.acked} acknowledged, {t.failed_sends} sends failed, "
                         f"{t.in_log} in the log, {t.reads} {readers}; lost {len(t.lost)}, moved "
                         f"{len(t.moved)}, duplicates {len(t.duplicates)} (+{len(t.session_duplicates)} "
                         f"under a new producer session), order violations "
                         f"{len(t.order_violations)}, reads vanished {len(t.vanished_reads)}")
            if t.semantics.read_committed:
                lines.append(f"  {t.aborted} records in aborted transactions; uncommitted reads "
                             f"{len(t.unacked_reads)}, inputs missing {len(t.inputs_missing)}")
            for w in t.unavailable:
                lines.append(f"  unavailable {w.start - started:7.1f}s .. {w.end - started:7.1f}s "
                             f"({w.seconds:.1f}s) partitions {list(w.partitions)}")
            for r in self.recoveries.get(t.topic, []):
                a = "never" if r.after_start_s is None else f"{r.after_start_s:.1f}s after the fault"
                h = "" if r.after_heal_s is None else \
                    " (before heal)" if r.after_heal_s == 0 else f" ({r.after_heal_s:.1f}s after heal)"
                lines.append(f"  recovered {a}{h}: {r.fault}")
            lines += [f"  ALLOWED: {x}" for x in t.allowed()]
            lines += [f"  {n} lost or moved records were acknowledged around {f}" for f, n in t.lost_during.items()]
        lines += [f"ANOMALY: {x}" for x in self.anomalies()]
        lines.append(f"{self.records_checked} acknowledged records checked, {len(self.anomalies())} anomalies")
        return "\n".join(lines)


def _parse(value: bytes) -> tuple[str, int]:
    producer, _, seq = value.decode(errors="replace").rpartition(":")
    return producer, int(seq) if seq.isdigit() else -1


def _nearest_fault(faults: list[FaultWindow], at: float) -> str:
    """The fault a loss acknowledged at ``at`` belongs to: the one under way then, else the nearest one that began
    up to LEAD_S later (the record was not yet copied) or was healed up to TRAIL_S earlier (the cut-off leader had
    not yet heard it was replaced); "no fault" if none."""
    best, name = float("inf"), "no fault"
    for f in faults:
        if f.started <= at <= f.healed:
            return f.name
        distance = f.started - at if at < f.started else at - f.healed
        limit = LEAD_S if at < f.started else TRAIL_S
        if distance <= limit and distance < best:
            best, name = distance, f.name
    return name


def _sessions(h: History, topic: str, places: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """(producer id, epoch) of the batch holding each place; None when the batch headers are not all known."""
    out = []
    for p, o in places:
        batch = h.batches.get((topic, p), {}).get(o)
        if batch is None or batch.producer_id < 0:
            return None
        out.append((batch.producer_id, batch.producer_epoch))
    return out


def _check_topic(h: History, topic: str, gap_s: float) -> TopicReport:
    report = TopicReport(topic, h.semantics[topic], failed_sends=h.failed_sends.get(topic, 0))
    acks = [a for a in h.acks if a.topic == topic]
    report.acked = len(acks)
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)  # value -> every (partition, offset) holding it
    at: dict[tuple[int, int], bytes] = {}
    for p in range(h.partitions[topic]):
        log = h.final.get((topic, p), [])
        report.in_log += len(log)
        for offset, value in log:
            where[value].append((p, offset))
            at[(p, offset)] = value
    resent: set[tuple[int, int]] = set()  # later copies written under another producer session than the first
    for value, places in where.items():
        if len(places) > 1:
            sessions = _sessions(h, topic, places)
            if sessions is not None and len(set(sessions)) == len(sessions):
                report.session_duplicates.append(f"{value!r} at " + ", ".join(
                    f"{p}/{o} ({h.batches[(topic, p)][o].describe(o)})" for p, o in places))
                resent.update(places[1:])
            else:
                report.duplicates.append(f"{value!r} at {places}" + ("" if sessions is None else " (" + ", ".join(
                    h.batches[(topic, p)][o].describe(o) for p, o in places) + ")"))
    for p in range(h.partitions[topic]):
        highest: dict[str, tuple[int, int]] = {}  # producer -> its highest sequence so far, and where
        for offset, value in h.final.get((topic, p), []):
            producer, seq = _parse(value)
            prev = highest.get(producer)
            if prev is not None and seq < prev[0]:  # equal: a duplicate, reported as one
                if (p, offset) in resent:
                    report.session_reorderings += 1
                else:
                    report.order_violations.append(f"partition {p}: {value!r} at offset {offset} after "
                                                   f"{producer}:{prev[0]} at offset {prev[1]}")
            if prev is None or seq > prev[0]:
                highest[producer] = (seq, offset)
    for a in acks:
        if at.get((a.partition, a.offset)) == a.value:
            continue
        if a.value in where:
            report.moved.append(f"{a.value!r} acknowledged at {a.partition}/{a.offset}, found at {where[a.value]}")
        else:
            report.lost.append(f"{a.value!r} acknowledged at {a.partition}/{a.offset}")
        during = _nearest_fault(h.faults, a.at)
        report.lost_during[during] = report.lost_during.get(during, 0) + 1
    acked_values = {a.value for a in acks}
    reads = [r for r in h.reads if r.topic == topic]
    report.reads = len(reads)
    for r in reads:
        if at.get((r.partition, r.offset)) != r.value:
            report.vanished_reads.append(f"{r.consumer} read {r.value!r} at {r.partition}/{r.offset}; the log now "
                                         f"holds {at.get((r.partition, r.offset))!r}")
        if r.value not in acked_values:
            report.unacked_reads.append(f"{r.value!r} at {r.partition}/{r.offset}")
    report.unavailable = unavailability(acks, h.partitions[topic], gap_s)
    return report


def _check_transform(h: History, topic: str, source: str, gap_s: float) -> TopicReport:
    """A consume-transform-produce stage's output, read back under read_committed, against its input's log."""
    report = TopicReport(topic, h.semantics[topic])
    aborted, in_doubt = h.aborted.get(topic, set()), h.in_doubt.get(topic, set())
    report.aborted = len(aborted)
    acks = [a for a in h.acks if a.topic == topic]
    report.acked = len(acks)
    committed = {a.value for a in acks}
    at: dict[tuple[int, int], bytes] = {}
    places: dict[bytes, list[str]] = defaultdict(list)  # input value -> where its transformations are
    for p in range(h.partitions[topic]):
        log = h.final.get((topic, p), [])
        report.in_log += len(log)
        highest: tuple[int, int] | None = None  # the input partition's highest sequence so far, and its offset
        for offset, value in log:
            at[(p, offset)] = value
            source_value, _, _txn = value.rpartition(b"/")
            places[source_value].append(f"{p}/{offset} {value!r}")
            if value in in_doubt:
                report.in_doubt_seen += 1
            elif value not in committed:
                kind = "aborted" if value in aborted else "never produced"
                report.unacked_reads.append(f"the log holds {value!r} ({kind}) at {p}/{offset}")
            seq = _parse(source_value)[1]
            if highest is not None and seq < highest[0]:
                report.order_violations.append(f"partition {p}: {value!r} at offset {offset} after input sequence "
                                               f"{highest[0]} at offset {highest[1]}")
            if highest is None or seq > highest[0]:
                highest = (seq, offset)
    for source_value, where in places.items():
        if len(where) > 1:
            report.duplicates.append(f"input {source_value!r} at {where}")
    for sp in range(h.partitions[source]):
        for offset, value in h.final.get((source, sp), []):
            if value not in places:
                report.inputs_missing.append(f"{source}-{sp}/{offset} {value!r}")
    for a in acks:
        if at.get((a.partition, a.offset)) != a.value:
            report.lost.append(f"{a.value!r} committed at {a.partition}/{a.offset}, the log holds "
                               f"{at.get((a.partition, a.offset))!r}")
            during = _nearest_fault(h.faults, a.at)
            report.lost_during[during] = report.lost_during.get(during, 0) + 1
    reads = [r for r in h.reads if r.topic == topic]
    report.reads = len(reads)
    for r in reads:
        if r.value not in committed and r.value not in in_doubt:
            kind = "aborted" if r.value in aborted else "never produced"
            report.unacked_reads.append(f"{r.consumer} read {r.value!r} ({kind}) at {r.partition}/{r.offset}")
        elif at.get((r.partition, r.offset)) != r.value:
            report.vanished_reads.append(f"{r.consumer} read {r.value!r} at {r.partition}/{r.offset}; the log now "
                                         f"holds {at.get((r.partition, r.offset))!r}")
    report.unavailable = unavailability(_as_one(acks), 1, max(gap_s, TXN_GAP_S))
    return report


def _as_one(acks: list[Ack]) -> list[Ack]:
    """A stage's commits as one stream: a transaction takes what one consume returns, often one partition's
    records, so a partition without a commit for a while says nothing about the stage's availability."""
    return [replace(a, partition=0) for a in acks]


def unavailability(acks: list[Ack], partitions: int, gap_s: float) -> list[Window]:
    """Spans of at least ``gap_s`` in which some partition acknowledged nothing, merged across partitions.

    Measured between a partition's consecutive acknowledgements, so it counts only while the producer kept sending
    (the workloads send to every partition all the time)."""
    spans: list[tuple[float, float, int]] = []
    for p in range(partitions):
        times = sorted(a.at for a in acks if a.partition == p)
        spans += [(t0, t1, p) for t0, t1 in itertools.pairwise(times) if t1 - t0 >= gap_s]
    spans.sort()
    windows: list[Window] = []
    for start, end, p in spans:
        if windows and start <= windows[-1].end:
            last = windows[-1]
            windows[-1] = Window(last.start, max(last.end, end), tuple(sorted({*last.partitions, p})))
        else:
            windows.append(Window(start, end, (p,)))
    return windows


def recoveries(acks: list[Ack], partitions: int, faults: list[FaultWindow]) -> list[Recovery]:
    """Per fault: how long until every partition acknowledged a record sent after the fault began."""
    out = []
    for f in faults:
        firsts: list[float] = []
        for p in range(partitions):
            after = [a.at for a in acks if a.partition == p and a.sent >= f.started]
            if not after:
                firsts = []
                break
            firsts.append(min(after))
        if not firsts:
            out.append(Recovery(f.name, None, None))
            continue
        done = max(firsts)
        out.append(Recovery(f.name, done - f.started, max(0.0, done - f.healed)))
    return out


def offsets_backwards(h: History) -> list[str]:
    """A partition's group offset that went below a commit the coordinator had already acknowledged: either a
    consumer then assigned the partition started reading below it, or the group's final offset is below it."""
    out = []
    commits: dict[tuple[str, int], list[Commit]] = defaultdict(list)
    for c in h.commits:
        commits[(c.topic, c.partition)].append(c)
    for a in h.assignments:
        before = [c for c in commits[(a.topic, a.partition)] if c.at < a.at]
        if before:
            best = max(before, key=lambda c: c.offset)
            if a.first_offset < best.offset:
                out.append(f"{a.consumer} assigned {a.topic}-{a.partition} started at offset {a.first_offset}, "
                           f"below {best.offset} that {best.consumer} had committed")
    for tp, cs in sorted(commits.items()):
        best_offset = max(c.offset for c in cs)
        final = h.final_committed.get(tp)
        if final is not None and final < best_offset:
            out.append(f"{tp[0]}-{tp[1]}: the group's final offset {final} is below the acknowledged commit "
                       f"{best_offset}")
    return out


def check(h: History, gap_s: float = 1.0) -> Report:
    topics = [_check_transform(h, t, h.transforms[t], gap_s) if t in h.transforms else _check_topic(h, t, gap_s)
              for t in sorted(h.semantics)]
    recs = {t: recoveries([a for a in h.acks if a.topic == t], h.partitions[t], h.faults) for t in sorted(h.semantics)
            if t not in h.transforms}
    recs |= {t: recoveries(_as_one([a for a in h.acks if a.topic == t]), 1, h.faults) for t in h.transforms}
    return Report(topics, offsets_backwards(h), recs)
