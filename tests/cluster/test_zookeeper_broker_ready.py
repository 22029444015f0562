"""``odradek broker --ready-file``: the ready file appears only once the broker has heard from a controller, as
``odradek up``'s does. Before that a client's first Metadata answer says controller -1, and librdkafka's admin client
then waits out its whole request timeout before it asks again (a CreateTopics right after start-up timed out)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from brokers import wait_for
from odradek.coordination.localzk import LocalZooKeeper
from odradek.ready_file import read_ready_file

pytestmark = pytest.mark.zookeeper


def test_a_ready_broker_already_knows_its_controller(tmp_path: Path) -> None:
    with LocalZooKeeper(tmp_path / "zookeeper") as server:
        ready = tmp_path / "ready"
        with open(tmp_path / "broker.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "odradek", "broker", "--id", "7", "--zookeeper", f"{server.hosts}/odradek",
                 "--port", "0", "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready)],
                stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            wait_for(lambda: ready.exists() or proc.poll() is not None, 90, what="the broker's ready file")
            assert proc.poll() is None, (tmp_path / "broker.log").read_text()[-3000:]
            admin = AdminClient({"bootstrap.servers": read_ready_file(ready)["bootstrap.servers"]})
            assert admin.list_topics(timeout=30).controller_id == 7  # the first Metadata answer after ready
        finally:
            proc.kill()
            proc.wait(30)
