"""odradek as a user gets it: a built wheel installed outside the repository, used through its pytest plugin.

A fresh virtualenv that downloads every dependency would take minutes, so the scratch environment is a venv
without pip into which only odradek's wheel is installed (``pip --python VENV install --no-deps``); the
dependencies (confluent-kafka, pytest, ...) come from the test run's own site-packages, added to the venv's path
by a ``.pth`` line. A plain directory line does not run that site's own ``.pth`` files, so the repository's
editable odradek stays invisible: the scratch tests check that ``odradek`` is imported from the venv.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from odradek import __version__

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DATA_SUFFIXES = {".html", ".js", ".css", ".svg", ".png", ".ico"}

SCRATCH_TEST = '''
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def test_odradek_comes_from_the_installed_wheel():
    import odradek

    assert Path(odradek.__file__).resolve().is_relative_to(Path(sys.prefix).resolve())


def leader_of(admin, topic):
    return admin.list_topics(topic, timeout=30).topics[topic].partitions[0].leader


@pytest.mark.odradek(brokers=3, racks=["a", "b", "c"], overrides={"min.insync.replicas": 2})
def test_a_killed_leader_loses_no_acknowledged_record(odradek_cluster):
    bootstrap = odradek_cluster.bootstrap_servers
    assert len(bootstrap.split(",")) == 3
    admin = AdminClient({"bootstrap.servers": bootstrap})
    nodes = admin.describe_cluster().result(30).nodes
    assert sorted(n.rack for n in nodes) == ["a", "b", "c"]
    admin.create_topics([NewTopic("orders", 1, 3)])["orders"].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(50):
        producer.produce("orders", str(i).encode())
    assert producer.flush(30) == 0

    old = leader_of(admin, "orders")
    odradek_cluster.kill(old)
    for i in range(50, 100):
        producer.produce("orders", str(i).encode())
    assert producer.flush(60) == 0
    deadline = time.monotonic() + 30
    while leader_of(admin, "orders") in (old, -1):
        assert time.monotonic() < deadline, "no new leader"
        time.sleep(0.1)
    assert odradek_cluster.wait_for_controller() != old

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    seen = []
    while len(seen) < 100:
        assert time.monotonic() < deadline + 30, f"read {len(seen)} of 100"
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(int(message.value()))
    consumer.close()
    assert seen == list(range(100))

    odradek_cluster.restart(old)
    assert len(odradek_cluster.bootstrap_servers.split(",")) == 3


def test_the_session_cluster_is_shaped_by_the_ini_file(odradek_cluster_session):
    assert len(odradek_cluster_session.bootstrap_servers.split(",")) == 2
    assert odradek_cluster_session.controller_id() is not None
'''


def _run(*cmd: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{cmd} exited {done.returncode}:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    return done.stdout


def build_wheel(tmp: Path) -> Path:
    """Build from a copy of the sources, so the build leaves nothing (build/, egg-info) in the repository."""
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
    dist = tmp / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", dist, source)
    (wheel,) = dist.glob("odradek-*.whl")
    return wheel


def test_a_scratch_project_installs_the_wheel_and_uses_the_fixture(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "[pytest11]\nodradek = odradek.pytest_plugin" in entry_points
    assert "odradek = odradek.cli:main" in entry_points
    data_files = [p.relative_to(REPO / "src").as_posix() for p in (REPO / "src" / "odradek").rglob("*")
                  if p.suffix in PACKAGE_DATA_SUFFIXES]
    assert all(f in names for f in data_files), sorted(set(data_files) - names)
    assert "odradek/py.typed" in names

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())
    (purelib / "odradek-test-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))}
    project = tmp_path / "scratch"
    project.mkdir()
    assert _run(venv / "bin" / "odradek", "--version", cwd=project, env=env).strip() == __version__
    (project / "pytest.ini").write_text("[pytest]\nodradek_brokers = 2\n")
    (project / "test_orders.py").write_text(textwrap.dedent(SCRATCH_TEST))
    out = _run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project, env=env)
    assert "3 passed" in out, out
