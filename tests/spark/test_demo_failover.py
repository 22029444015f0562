"""A broker killed and restarted mid-stream on an RF=3 topic: the file sink loses and duplicates nothing.

``odradek demo`` runs the example Structured Streaming job against a three-broker cluster, kills the leader of
``clicks-0`` while events flow, restarts it, and compares the Parquet output with exactly what the generator
produced. It runs in its own process (its own Spark driver), so this module's shared SparkSession is untouched. It
runs once through Spark's own Kafka connector and once through odradek's source and sink: both must match.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("fmt", ["kafka", "odradek"])
def test_broker_killed_during_streaming_query_loses_and_duplicates_nothing(tmp_path: Path, fmt: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "odradek", "demo", "--brokers", "3", "--events", "4000", "--seconds", "60",
         "--data-dir", str(tmp_path / "demo"), "--format", fmt],
        capture_output=True, text=True, timeout=600,
    )
    out = result.stdout
    assert f"(format {fmt})" in out, out[-3000:]
    assert "killing broker" in out and "restarted" in out, out[-3000:] + result.stderr[-3000:]
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "totals match: nothing lost, nothing counted twice" in out
