"""The lab's transactional run (issue 15): a consume-transform-produce stage (read_committed consumer, transactional
producer, offsets committed with send_offsets_to_transaction, every fifth transaction aborted on purpose) and a
read_committed reader of its output, beside the idempotent and acks=1 loads, while the faults that matter for
transactions strike once each: the broker hosting the stage's transaction coordinator killed, the leader of an
output partition isolated, a broker paused. Nothing committed may be lost, nothing aborted read, each input must be
in the output exactly once and in its partition's order. A client blocked in librdkafka (confluentinc/librdkafka
#5511) is replaced and counted, not failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.lab.nemesis import Fault, Kind
from odradek.lab.run import TXN_OUTPUT, run

pytestmark = [pytest.mark.lab, pytest.mark.timeout(400)]

SCHEDULE = [
    Fault(Kind.KILL_BROKER, "coordinator", 5.0),
    Fault(Kind.ISOLATE_BROKER, "leader:0", 5.0),
    Fault(Kind.PAUSE_BROKER, "broker:1", 5.0),
]


def test_transactions_exactly_once_under_coordinator_kill_leader_isolation_and_pause(tmp_path: Path) -> None:
    result = run(2, schedule=SCHEDULE, base_dir=tmp_path, transactional=True)
    report = result.report
    assert report.anomalies() == [], report.format(result.started)
    assert all(e.healthy is not None for e in result.events), [e.resolved for e in result.events]
    assert result.transform is not None
    output = next(t for t in report.topics if t.topic == TXN_OUTPUT)
    assert result.transform.committed > 5 and result.transform.aborted > 0, result.transform.summary()
    assert output.acked > 200 and output.aborted > 0 and output.reads >= output.acked
