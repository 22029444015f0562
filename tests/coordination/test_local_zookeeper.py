"""The test ZooKeeper server: starting one that runs already must not start (and leak) a second."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.coordination.localzk import LocalZooKeeper


@pytest.mark.zookeeper
def test_start_inside_with_starts_one_server_and_stop_ends_it(tmp_path: Path) -> None:
    with LocalZooKeeper(tmp_path / "zk").start() as zk:  # start(), then __enter__ starts again
        proc, port = zk.proc, zk.port
        assert proc is not None and proc.poll() is None
        assert zk.start() is zk and zk.proc is proc and zk.port == port
    assert proc.poll() is not None and zk.proc is None
    assert len(list((tmp_path / "zk").glob("zoo-*.cfg"))) == 1
