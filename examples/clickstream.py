"""Clickstream generator: JSON page-view events into a topic, with the exact totals it produced.

Events carry their own event time (``ts``, epoch ms) on a simulated clock that starts at a whole minute
and spreads ``events`` evenly over ``minutes``, so every run knows precisely how many views each page
got in each minute. A final ``__flush__`` event two minutes past the end advances the streaming job's
watermark so the last windows are emitted; it is not a page view.

    python examples/clickstream.py --bootstrap HOST:PORT --topic clicks --events 20000 --minutes 5
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer

PAGES = ["/", "/pricing", "/docs", "/blog", "/signup", "/login", "/about", "/careers"]
FLUSH_PAGE = "__flush__"


def minute_of(ts_ms: int) -> int:
    return ts_ms - ts_ms % 60_000


def generate(
    bootstrap: str,
    topic: str,
    *,
    events: int,
    minutes: int = 5,
    start_ms: int | None = None,
    seed: int = 7,
    rate_per_s: float | None = None,
) -> Counter[tuple[str, int]]:
    """Produce the events (acks=all, idempotent) and return views per (page, window start in ms)."""
    rng = random.Random(seed)
    start = minute_of(start_ms if start_ms is not None else int(time.time() * 1000) - minutes * 60_000)
    step = minutes * 60_000 / events
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 20})
    failures: list[object] = []
    totals: Counter[tuple[str, int]] = Counter()
    began = time.monotonic()
    for i in range(events):
        page = rng.choices(PAGES, weights=[30, 10, 20, 15, 5, 10, 5, 5])[0]
        ts = start + int(i * step)
        event = {"user": f"u{rng.randrange(1000)}", "page": page, "ts": ts}
        _send(producer, topic, event, failures)
        totals[(page, minute_of(ts))] += 1
        if rate_per_s:
            ahead = i / rate_per_s - (time.monotonic() - began)
            if ahead > 0:
                time.sleep(ahead)
    _send(producer, topic, {"user": "-", "page": FLUSH_PAGE, "ts": start + (minutes + 2) * 60_000}, failures)
    if producer.flush(120) or failures:
        raise RuntimeError(f"produce failed: {failures[:3]}")
    return totals


def _send(producer: Producer, topic: str, event: dict, failures: list[object]) -> None:
    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    while True:
        try:
            producer.produce(
                topic, key=event["user"].encode(), value=json.dumps(event).encode(), on_delivery=on_delivery
            )
            producer.poll(0)
            return
        except BufferError:
            producer.poll(0.05)


def save_totals(totals: Counter[tuple[str, int]], path: Path) -> None:
    path.write_text(json.dumps([[page, window, n] for (page, window), n in sorted(totals.items())]))


def load_totals(path: Path) -> Counter[tuple[str, int]]:
    return Counter({(page, window): n for page, window, n in json.loads(path.read_text())})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", default="clicks")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--minutes", type=int, default=5)
    parser.add_argument("--rate", type=float, help="events per second (default: as fast as possible)")
    parser.add_argument("--totals", type=Path, help="write the expected totals here as JSON")
    args = parser.parse_args()
    totals = generate(args.bootstrap, args.topic, events=args.events, minutes=args.minutes, rate_per_s=args.rate)
    if args.totals:
        save_totals(totals, args.totals)
    print(f"produced {sum(totals.values())} page views over {len({w for _, w in totals})} minutes")


if __name__ == "__main__":
    main()
