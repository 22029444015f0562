"""The ready file ``--ready-file`` names: one ``key=value`` line per endpoint, written once the brokers serve.

A script reads it line by line and takes everything after the first ``=``: ``bootstrap.servers`` comes first,
then whatever else the process serves (``metrics``, one ``bootstrap.servers.<LISTENER>`` line per listener when
``listeners`` is set, and any endpoint added later). Each value is a comma-separated list, one entry per broker.
The stdout ready line keeps its older shape (``bootstrap.servers=... metrics=...`` on one line).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def ready_line(endpoints: Mapping[str, str]) -> str:
    """The stdout line: ``bootstrap.servers=...``, then ``schema.registry.url=...`` and ``metrics=...`` after a
    space each, when they are served."""
    return " ".join(f"{key}={endpoints[key]}" for key in ("bootstrap.servers", "schema.registry.url", "metrics")
                    if key in endpoints)


def write_ready_file(path: Path, endpoints: Mapping[str, str]) -> None:
    """Write every endpoint, in order, atomically (a reader never sees half a file)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(f"{key}={value}\n" for key, value in endpoints.items()))
    tmp.replace(path)


def read_ready_file(path: Path) -> dict[str, str]:
    """The endpoints of a ready file, by key, in the order written."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out
