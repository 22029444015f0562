"""One single-broker cluster per test module for the CLI tests, on a background loop (odradek.testing)."""

from __future__ import annotations

import gc
import uuid
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result

from odradek.cli import main
from odradek.testing import ThreadedCluster, start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedCluster]:
    c = start_cluster(tmp_path_factory.mktemp("cli-cluster"), brokers=1)
    yield c
    gc.collect()  # librdkafka handles left in cycles go while the broker still answers
    c.close()


@pytest.fixture
def cli() -> Callable[..., Result]:
    """Run ``odradek ARGS`` in this process (click's runner): stdout and stderr apart, exit code kept."""
    runner = CliRunner()

    def run(*args: str, input: str | None = None) -> Result:
        return runner.invoke(main, list(args), input=input, catch_exceptions=False)

    return run


@pytest.fixture
def name() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"
