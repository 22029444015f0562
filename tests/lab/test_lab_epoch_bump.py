"""Issue 15's open anomaly, reproduced: librdkafka writing records twice across an epoch bump, and what the broker
and the lab checker make of it (tests/epoch_bump.py has the scenario; bench/epoch_bump_duplicates.py the numbers).

The assertions are the broker's guarantee, which holds whatever the client does: no record is in the log twice
under one producer id and epoch, and the checker counts copies under different sessions as allowed, not as
anomalies. With today's librdkafka (2.16) the re-sent copies are there and must be exactly that kind; a fixed
librdkafka that fails the possibly-persisted records instead of re-sending them passes the same assertions.
"""

from __future__ import annotations

from pathlib import Path

from epoch_bump import LOST, TIMED_OUT, TIMED_OUT_RECORDS, TOPIC, Outcome, reproduce


def _check_broker_guarantee(out: Outcome) -> None:
    assert out.lost_responses, "the proxy lost no Produce response: the scenario did not run"
    assert out.written_before_heal > 0, "broker 0 wrote nothing before the response was lost"
    assert out.same_session_duplicates() == {}, "a record written twice under one producer id and epoch"
    assert out.report is not None
    assert out.report.anomalies() == [], out.report.format()
    (topic,) = out.report.topics
    assert topic.duplicates == [] and topic.order_violations == []
    assert len(topic.session_duplicates) == len(out.duplicates)
    assert not topic.lost and not topic.moved  # every acknowledged record is where its acknowledgement said


def test_records_resent_under_a_bumped_epoch_are_a_new_session_for_the_broker_and_allowed_by_the_checker(
        tmp_path: Path) -> None:
    out = reproduce(tmp_path / "cluster")
    _check_broker_guarantee(out)
    assert out.bumped_to is not None  # librdkafka's own line: "All partitions drained, bumped epoch to PID{...}"
    assert out.failed_in.get(TIMED_OUT) == TIMED_OUT_RECORDS  # the records whose timeouts made the bump
    assert out.acked + sum(out.failed.values()) == out.sent  # every record reported once, delivered or not
    for value, copies in out.duplicates.items():  # with librdkafka 2.16: the whole lost batch, once more
        first, again = copies
        assert first.partition == again.partition == LOST and first.offset < again.offset, (value, copies)
        assert first.session != again.session and again.session == out.bumped_to, (value, copies)
        assert again.batch.producer_epoch > first.batch.producer_epoch


def test_a_lost_response_retried_in_the_same_session_is_not_written_again(tmp_path: Path) -> None:
    """The control: the same lost response without a bump; the retry (same id, epoch and sequences) must be
    acknowledged from the broker's memory of the producer's last batches, not appended a second time."""
    out = reproduce(tmp_path / "cluster", bump=False)
    _check_broker_guarantee(out)
    assert out.bumped_to is None and out.failed == {}
    assert out.duplicates == {}
    assert out.acked == out.sent
    assert out.report is not None and out.report.topics[0].in_log == out.sent, TOPIC
