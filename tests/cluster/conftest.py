from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import ThreadedCluster


@pytest.fixture
def cluster_factory(tmp_path: Path) -> Iterator[Callable[..., ThreadedCluster]]:
    made: list[ThreadedCluster] = []

    def make(brokers: int = 3, **kwargs: object) -> ThreadedCluster:
        overrides = {"group.initial.rebalance.delay.ms": "0", "zookeeper.session.timeout.ms": "2000",
                     "replica.lag.time.max.ms": "3000", "leader.imbalance.check.interval.seconds": "300"}
        overrides.update(kwargs.pop("overrides", {}))  # type: ignore[arg-type]
        c = ThreadedCluster(brokers, tmp_path / f"cluster{len(made)}", overrides=overrides, **kwargs)
        made.append(c)
        return c.start()

    yield make
    for c in made:
        c.close()
