"""Helpers the CLI tests share (imported by name, never from conftest)."""

from __future__ import annotations

from pathlib import Path

from odradek.testing import ThreadedCluster


def table(text: str) -> list[dict[str, str]]:
    """Rows of a Kafka-style column table (header line, whitespace-separated cells) as dicts by header."""
    lines = [line for line in text.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.split() and line.split()[0] == "GROUP")
    headers = lines[start].split()
    return [dict(zip(headers, line.split(), strict=True)) for line in lines[start + 1 :]]


def data_dir(cluster: ThreadedCluster) -> Path:
    return Path(cluster.cluster.data_dir)
