"""A lab killed outright (SIGKILL: no finally, no atexit) leaves namespaces and servers behind; the next lab to take
its slot, or ``python -m odradek.lab clean``, removes them and ends the servers still running in them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from odradek.lab.netns import PREFIX, ip

pytestmark = [pytest.mark.lab, pytest.mark.timeout(180)]

START = """
import sys, time
from odradek.lab.cluster import Lab
lab = Lab(brokers=1, zookeepers=1).start()
print(lab.network.slot, lab.brokers[0].proc.pid, lab.zookeepers[1].proc.pid, flush=True)
time.sleep(600)
"""


def _namespaces(slot: int) -> list[str]:
    return [line.split()[0] for line in ip("netns", "list").stdout.splitlines()
            if line.startswith(f"{PREFIX}{slot}-")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_killed_runs_namespaces_and_servers_are_removed_by_the_next_clean() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", START], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        slot, broker_pid, zk_pid = (int(x) for x in proc.stdout.readline().split())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert _namespaces(slot), "the killed lab's namespaces should still be there"
    assert _alive(broker_pid) and _alive(zk_pid), "its servers outlive it"
    subprocess.run([sys.executable, "-m", "odradek.lab", "clean"], check=True, env=env, timeout=60)
    assert _namespaces(slot) == []
    assert ip("link", "show", f"{PREFIX}{slot}host", check=False).returncode != 0
    assert not _alive(broker_pid) and not _alive(zk_pid)
