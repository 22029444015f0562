"""Fixtures for log tests: real files under tmp_path and a manual clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from logtest_helpers import T0

from odradek.broker.log.partition_log import PartitionLog
from odradek.broker.topic_config import LogConfig
from odradek.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def open_log(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., PartitionLog]]:
    """Factory opening ``tmp_path/topic-0`` with a config; logs opened here are closed at teardown."""
    opened: list[PartitionLog] = []

    def factory(config: LogConfig | None = None, **kwargs: object) -> PartitionLog:
        log = PartitionLog.open(tmp_path / "topic-0", config or LogConfig(), clock, **kwargs)  # type: ignore[arg-type]
        opened.append(log)
        return log

    yield factory
    for log in opened:
        if not log.offline:
            for segment in log.segments:
                segment.close()
