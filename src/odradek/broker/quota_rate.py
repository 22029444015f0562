"""The arithmetic of Kafka's client quotas: a windowed rate and the throttle time that brings it back to the bound.

Kafka measures a client's bytes with a ``Rate`` over a ``WindowedSum`` (``org.apache.kafka.common.metrics``):
``quota.window.num`` samples of ``quota.window.size.seconds`` each, the current one included. The rate divides the
sum of the retained samples by the time they span, counted as at least ``samples - 1`` whole windows, so a client
that just started is measured over the whole window and may burst one window's worth at the start. A sample that
saw no event for ``samples`` windows is reset. When a recording lifts the rate above the bound, the throttle time
is what makes the average fall back to it if nothing more came: ``(rate - bound) / bound * window``.

Pure: every call takes the time in milliseconds, so tests replay Kafka's ClientQuotaManagerTest vectors exactly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0
    events: int = 0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0
        self.events = 0


class Rate:
    """Kafka's ``Rate(WindowedSum)`` in units per second, for one sensor."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a rate needs at least one sample of at least one millisecond")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """Units per second over the retained samples (their sum over :meth:`window_size`)."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (self.window_size(now_ms) / 1000.0)

    def window_size(self, now_ms: int) -> int:
        """The span the rate divides by: from the oldest retained sample to now, but never less than
        ``samples - 1`` whole windows (plus the part of the current one), and at least 1 ms."""
        self._purge(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # one extra slot, as Kafka keeps, for the sample that overlaps the start of the monitored window
        self._current = (self._current + 1) % (self.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    def _purge(self, now_ms: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)


def throttle_time_ms(rate: float, bound: float, window_ms: int) -> int:
    """Kafka's QuotaUtils.throttleTime: the delay X such that ``rate * W / (W + X) = bound``, rounded half up.

    A bound of zero or less (Kafka accepts ``producer_byte_rate=0``) makes every byte too many: the client waits
    the whole window."""
    if bound <= 0:
        return window_ms
    return int((rate - bound) / bound * window_ms + 0.5)
