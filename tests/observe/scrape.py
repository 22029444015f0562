"""Reading brokers' /metrics and /api endpoints the way Prometheus and the console page do: plain HTTP GETs."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

T = TypeVar("T")


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of one broker's /metrics: (name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


def value(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(urls: Iterable[str], name: str, **labels: str) -> float:
    """A sample summed over brokers (what ``sum(...)`` in PromQL gives)."""
    return sum(value(scrape(u), name, **labels) for u in urls)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def wait_for(probe: Callable[[], T], ok: Callable[[T], bool], timeout: float, what: str) -> T:
    """Poll ``probe`` until ``ok`` holds for its value; fail naming ``what`` and the last value."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if ok(got):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still {got!r} after {timeout}s")
        time.sleep(0.1)


def metrics_urls(cluster: Any) -> dict[int, str]:
    """broker id -> its /metrics URL, for the running brokers of a ``ThreadedCluster``."""
    return cluster.run(lambda: {
        i: f"http://{b.host}:{b.metrics_port}/metrics" for i, b in cluster.cluster.brokers.items() if b.running})
