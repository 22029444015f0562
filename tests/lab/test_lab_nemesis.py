"""The short nemesis run of CI (issue 15): a ZooKeeper ensemble and three brokers on their own network namespaces,
every fault kind once in a fixed seed's order, under an idempotent acks=all load, an acks=1 load and a committing
consumer group. acks=all with min.insync.replicas=2 must lose, duplicate and reorder nothing, no group offset may go
backwards, and the cluster must come back whole after every fault; acks=1's losses are Kafka's documented
behaviour and only counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.lab.nemesis import Kind
from odradek.lab.run import LOSSLESS, run

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]

SEED = 1


def test_every_fault_kind_once_loses_nothing_acks_all_promises(tmp_path: Path) -> None:
    result = run(SEED, None, base_dir=tmp_path)
    assert sorted(e.fault.kind for e in result.events) == sorted(Kind)
    report = result.report
    assert report.anomalies() == [], report.format(result.started)
    unhealed = [e.resolved for e in result.events if e.healthy is None]
    assert not unhealed, f"not back to full ISRs after: {unhealed}"
    lossless = next(t for t in report.topics if t.topic == LOSSLESS)
    assert lossless.acked > 1000 and lossless.reads >= lossless.acked
    assert all(r.after_start_s is not None for r in report.recoveries[LOSSLESS]), "a fault was never recovered from"
