"""``odradek up`` serving the registry (its URL on the ready line) and ``odradek schema-registry`` alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

from brokers import BrokerProcess, wait_for
from odradek.ready_file import read_ready_file


def _fields(ready: Path) -> dict[str, str]:
    return read_ready_file(ready)


def _types(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/schemas/types", timeout=30) as resp:
        assert resp.headers["Content-Type"].startswith("application/vnd.schemaregistry.v1+json")
        return list(json.loads(resp.read()))


def test_up_names_the_registry_after_the_bootstrap_servers(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory("--schema-registry-port", "0")
    ready = broker.data_dir.parent / f"{broker.data_dir.name}.ready"
    assert list(_fields(ready))[:2] == ["bootstrap.servers", "schema.registry.url"]
    assert _fields(ready)["schema.registry.url"].startswith("http://127.0.0.1:")
    assert _types(_fields(ready)["schema.registry.url"]) == ["JSON", "PROTOBUF", "AVRO"]
    stdout_line = broker.log_text().splitlines()
    assert any(line.startswith("bootstrap.servers=") and " schema.registry.url=http://127.0.0.1:" in line
               for line in stdout_line)


def test_none_turns_it_off_and_a_bad_port_is_a_usage_error(broker_factory: Callable[..., BrokerProcess],
                                                           tmp_path: Path) -> None:
    broker = broker_factory()  # the shared helper passes --schema-registry-port none
    assert "schema.registry.url" not in (broker.data_dir.parent / f"{broker.data_dir.name}.ready").read_text()
    bad = subprocess.run([sys.executable, "-m", "odradek", "up", "--port", "0", "--data-dir", str(tmp_path / "d"),
                          "--schema-registry-port", "eighty"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "a port, 0 or none" in bad.stderr


def test_schema_registry_alone_against_a_running_cluster(broker_factory: Callable[..., BrokerProcess],
                                                         tmp_path: Path) -> None:
    broker = broker_factory()
    ready = tmp_path / "sr.ready"
    proc = subprocess.Popen([sys.executable, "-m", "odradek", "schema-registry", "--bootstrap-server",
                             broker.bootstrap, "--port", "0", "--ready-file", str(ready)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        wait_for(lambda: ready.exists() and ready.read_text().strip(), 60, what="the registry's ready file")
        url = _fields(ready)["schema.registry.url"]
        request = urllib.request.Request(f"{url}/subjects/alone/versions", method="POST",
                                         data=json.dumps({"schema": '"string"'}).encode(),
                                         headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(request, timeout=60) as resp:
            assert json.loads(resp.read()) == {"id": 1}
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
