"""Garbage-collector settings for a process that holds a broker's worth of long-lived objects.

A broker keeps several objects per partition replica for as long as it runs (logs, segments, indexes, metadata,
replica state): millions of them at 100,000 partitions. With CPython's default thresholds (700, 10, 10) the cycle
collector runs every few hundred allocations and keeps rescanning that heap, which made building one 100,000-partition
UpdateMetadata request four to eight times slower than with the collector off (measured here). Raising the young
generation's threshold keeps collections rare and cheap; reference counting still frees almost everything at once.
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 20)


def tune() -> None:
    """Idempotent and process-wide; never lowers thresholds someone raised further."""
    current = gc.get_threshold()
    gc.set_threshold(*(max(c, t) for c, t in zip(current, THRESHOLDS, strict=True)))
