"""The checker's rules for a transactional consume-transform-produce stage, on hand-made histories: committed
records must stay, aborted ones must never be read under read_committed, each input appears exactly once and in
its partition's order; a transaction whose outcome the client never learned may go either way."""

from __future__ import annotations

from odradek.lab.checker import ACKS_ALL_IDEMPOTENT, EXACTLY_ONCE, Ack, History, Read, check

IN, OUT = "in", "out"


def _history() -> History:
    h = History({IN: ACKS_ALL_IDEMPOTENT, OUT: EXACTLY_ONCE}, {IN: 1, OUT: 1}, transforms={OUT: IN})
    h.acks = [Ack(IN, 0, 0, b"p:0", 0, 0), Ack(IN, 0, 1, b"p:1", 0, 0)]
    h.final[(IN, 0)] = [(0, b"p:0"), (1, b"p:1")]
    return h


def _commit(h: History, offset: int, value: bytes) -> None:
    h.acks.append(Ack(OUT, 0, offset, value, 0, 0))


def _out(report_topics: list, topic: str = OUT):  # type: ignore[no-untyped-def]
    return next(t for t in report_topics if t.topic == topic)


def test_each_input_once_with_an_abort_between_is_clean() -> None:
    h = _history()
    h.aborted[OUT] = {b"p:0/1", b"p:1/1"}  # transaction 1 aborted (its records are skipped by read_committed)
    _commit(h, 3, b"p:0/2")
    _commit(h, 4, b"p:1/2")
    h.final[(OUT, 0)] = [(3, b"p:0/2"), (4, b"p:1/2")]
    h.reads = [Read("r", OUT, 0, 3, b"p:0/2"), Read("r", OUT, 0, 4, b"p:1/2")]
    report = check(h)
    assert report.anomalies() == [], report.format()
    assert _out(report.topics).aborted == 2


def test_an_aborted_record_read_under_read_committed_is_an_anomaly() -> None:
    h = _history()
    h.aborted[OUT] = {b"p:0/1"}
    _commit(h, 2, b"p:0/2")
    _commit(h, 3, b"p:1/2")
    h.final[(OUT, 0)] = [(2, b"p:0/2"), (3, b"p:1/2")]
    h.reads = [Read("r", OUT, 0, 0, b"p:0/1")]
    anomalies = check(h).anomalies()
    assert len(anomalies) == 1 and "read under read_committed but never committed" in anomalies[0]
    assert "aborted" in anomalies[0]


def test_an_aborted_record_in_the_committed_log_is_an_anomaly() -> None:
    h = _history()
    h.aborted[OUT] = {b"p:0/1"}
    _commit(h, 2, b"p:1/2")
    h.final[(OUT, 0)] = [(0, b"p:0/1"), (2, b"p:1/2")]
    anomalies = check(h).anomalies()
    assert any("the log holds b'p:0/1' (aborted)" in a for a in anomalies), anomalies


def test_an_input_transformed_twice_is_a_duplicate_and_one_never_transformed_is_missing() -> None:
    h = _history()
    _commit(h, 0, b"p:0/1")
    _commit(h, 2, b"p:0/2")
    h.final[(OUT, 0)] = [(0, b"p:0/1"), (2, b"p:0/2")]
    report = _out(check(h).topics)
    assert len(report.duplicates) == 1 and "p:0" in report.duplicates[0]
    assert report.inputs_missing == [f"{IN}-0/1 b'p:1'"]
    assert len(report.anomalies()) == 2


def test_a_committed_record_missing_from_the_log_is_lost() -> None:
    h = _history()
    _commit(h, 0, b"p:0/1")
    _commit(h, 1, b"p:1/1")
    h.final[(OUT, 0)] = [(0, b"p:0/1")]
    report = _out(check(h).topics)
    assert len(report.lost) == 1 and "p:1/1" in report.lost[0]


def test_inputs_out_of_order_in_their_output_partition_are_a_violation() -> None:
    h = _history()
    _commit(h, 0, b"p:1/1")
    _commit(h, 1, b"p:0/2")
    h.final[(OUT, 0)] = [(0, b"p:1/1"), (1, b"p:0/2")]
    assert len(_out(check(h).topics).order_violations) == 1


def test_an_in_doubt_transaction_may_be_in_the_output_and_is_counted() -> None:
    h = _history()
    h.in_doubt[OUT] = {b"p:0/1", b"p:1/1"}  # the commit's reply was lost; it went through
    h.final[(OUT, 0)] = [(0, b"p:0/1"), (1, b"p:1/1")]
    h.reads = [Read("r", OUT, 0, 0, b"p:0/1")]
    report = check(h)
    assert report.anomalies() == []
    assert _out(report.topics).in_doubt_seen == 2
    assert any("never learned" in a for a in _out(report.topics).allowed())
