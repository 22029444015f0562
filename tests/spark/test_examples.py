"""The example pipeline end to end: generator totals equal the streaming job's per-minute counts."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from spark_brokers import Broker, wait_for

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_page_views_per_minute_match_what_the_generator_produced(spark, reader, broker: Broker, tmp_path: Path):
    sys.path.insert(0, str(EXAMPLES))
    try:
        import clickstream
        import page_views
    finally:
        sys.path.remove(str(EXAMPLES))

    clicks, views_topic = broker.create_topic(2), broker.create_topic(1)
    totals = clickstream.generate(broker.bootstrap, clicks, events=3_000, minutes=3)
    queries = page_views.start_queries(spark, broker.bootstrap, clicks, views_topic, tmp_path)
    try:
        # Windows are final once the watermark passes them; wait for both sinks to hold all of them.
        wait_for(
            lambda: (
                page_views.parquet_totals(spark, tmp_path) == totals
                and reader().option("subscribe", views_topic).load().count() >= len(totals)
            ),
            what="every window in both sinks",
            timeout_s=240,
            interval_s=2,
        )
    finally:
        for query in queries:
            query.stop()
    assert page_views.parquet_totals(spark, tmp_path) == totals

    records = reader().option("subscribe", views_topic).load().collect()
    from_topic = {
        (json.loads(r.value)["page"], json.loads(r.value)["window_ms"]): json.loads(r.value)["views"] for r in records
    }
    assert len(records) == len(totals)
    assert from_topic == dict(totals)
