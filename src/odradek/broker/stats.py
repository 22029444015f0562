"""Counters the broker's hot paths bump: plain integers and lists, no locks, no metrics library.

A produce or fetch touches these once per partition and a request once per request, so they must cost a dict
lookup and an addition, nothing more. Everything runs on the broker's one event loop, so nothing here locks;
:mod:`odradek.observe.metrics` turns the numbers into Prometheus families when somebody scrapes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict

__all__ = ["LATENCY_BUCKETS_MS", "LOOP_LAG_BUCKETS_S", "BrokerStats", "Histogram"]

LATENCY_BUCKETS_MS: tuple[float, ...] = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
"""Request time buckets, in milliseconds as Kafka's ``TotalTimeMs`` is; the top ones catch long-polling fetches."""

LOOP_LAG_BUCKETS_S: tuple[float, ...] = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Histogram:
    """Cumulative-at-read buckets: ``observe`` bumps one slot; the exporter sums them into Prometheus's form."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last slot is +Inf
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, count)`` pairs as Prometheus wants them, ``+Inf`` last."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(running)))
        return out


class BrokerStats:
    """What a broker has done since it started (a restarted broker starts from zero, as Kafka's meters do)."""

    def __init__(self) -> None:
        self.messages_in: defaultdict[str, int] = defaultdict(int)
        self.bytes_in: defaultdict[str, int] = defaultdict(int)
        self.bytes_out: defaultdict[str, int] = defaultdict(int)
        """Bytes sent to consumers; replication traffic is not counted, as Kafka's BytesOutPerSec does not."""
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.requests: dict[int, Histogram] = {}
        """API key -> time from a request's last byte read to its response handed to the socket (ms)."""
        self.request_bytes: defaultdict[int, int] = defaultdict(int)
        self.response_bytes: defaultdict[int, int] = defaultdict(int)
        """API key -> bytes of requests read and of responses written (without the 4-byte size): what fetch
        sessions save on the wire shows here."""
        self.loop_lag = Histogram(LOOP_LAG_BUCKETS_S)
        """How late the broker's 100 ms tick woke up: what every request on the loop waited behind."""

    def appended(self, topic: str, records: int, size: int) -> None:
        self.messages_in[topic] += records
        self.bytes_in[topic] += size

    def sent(self, topic: str, size: int) -> None:
        if size:
            self.bytes_out[topic] += size

    def request_done(self, api_key: int, elapsed_ms: float, request_size: int = 0, response_size: int = 0) -> None:
        self.request_bytes[api_key] += request_size
        self.response_bytes[api_key] += response_size
        histogram = self.requests.get(api_key)
        if histogram is None:
            histogram = self.requests[api_key] = Histogram(LATENCY_BUCKETS_MS)
        histogram.observe(elapsed_ms)

    def isr_changed(self, before: int, after: int) -> None:
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1
