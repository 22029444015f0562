"""The log limiter and the retry backoff that keep a process cut from ZooKeeper from flooding its log."""

from __future__ import annotations

from odradek.clock import ManualClock
from odradek.log_limit import LogLimiter


def test_the_first_line_is_logged_then_one_per_interval_with_what_was_held_back() -> None:
    clock = ManualClock()
    limiter = LogLimiter(clock, interval_ms=10_000)
    assert limiter.check("loss") == 0
    held = [limiter.check("loss") for _ in range(99)]  # a retry every 100 ms for 9.9 s
    assert held == [None] * 99
    clock.advance(9_999)
    assert limiter.check("loss") is None
    clock.advance(1)
    assert limiter.check("loss") == 100
    assert limiter.check("loss") is None


def test_distinct_conditions_are_limited_separately() -> None:
    clock = ManualClock()
    limiter = LogLimiter(clock, interval_ms=10_000)
    assert limiter.check(("loss", "EpochCheck")) == 0
    assert limiter.check(("loss", "BrokerChange")) == 0
    assert limiter.check(("loss", "EpochCheck")) is None


def test_a_cleared_condition_is_logged_again_at_once() -> None:
    clock = ManualClock()
    limiter = LogLimiter(clock, interval_ms=10_000)
    assert limiter.check("loss") == 0
    assert limiter.check("loss") is None
    limiter.clear("loss")
    assert limiter.check("loss") == 0
