"""Hosts as Linux network namespaces on one bridge, so brokers and ZooKeeper servers talk over real interfaces.

Layout of one lab (slot ``s``): a namespace ``odl<s>-net`` holding the bridge ``br0``; one namespace per host
(``odl<s>-<name>``) whose ``eth0`` is a veth into the bridge, with an address in ``10.77.<s>.0/24``; and one veth
from the machine's own namespace into the bridge (``odl<s>host``, address ``10.77.<s>.1``) so the test process
reaches every host at its real address. That host-side veth and its connected route are the only things created
outside the lab's namespaces.

Several labs can run on one machine at once: a lab holds an exclusive ``flock`` on ``/run/odradek-lab/slot-<s>.lock``
for as long as it lives, and the kernel drops the lock when its process dies however it dies. A free slot whose
namespaces still exist is therefore a dead run's leftovers, and :func:`acquire_slot` removes them (killing the
processes still inside them, which that run started) before using it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PREFIX", "Host", "Network", "acquire_slot", "clean_stale", "ip", "netns_available"]

PREFIX = "odl"
STATE_DIR = Path("/run/odradek-lab")
SLOTS = 16
SUBNET = "10.77"
FIRST_HOST = 10

log = logging.getLogger(__name__)


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip``; a failure raises with ip's own message, which names what it could not do."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def netns_available() -> str | None:
    """None when this process can create namespaces and veths here; otherwise why not (for a skip reason)."""
    if os.geteuid() != 0:
        return "the lab needs root (it creates network namespaces)"
    probe = f"{PREFIX}probe-{os.getpid()}"  # root in a container may still lack the right to create one: try it
    try:
        result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    except OSError as exc:
        return f"`ip` is unavailable: {exc}"
    if result.returncode != 0:
        return f"`ip netns add` is not permitted here: {result.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _namespaces() -> list[str]:
    out = ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _slot_names(slot: int) -> list[str]:
    return [ns for ns in _namespaces() if ns.startswith(f"{PREFIX}{slot}-")]


def clean_stale(slot: int, *, stale: bool = True) -> list[str]:
    """Remove slot ``slot``'s namespaces, the processes in them and its host veth; the caller holds the slot.
    ``stale``: they are a dead run's, which is worth a warning."""
    removed = []
    for ns in _slot_names(slot):
        pids = ip("netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        ip("netns", "del", ns, check=False)
        removed.append(ns)
    if ip("link", "show", f"{PREFIX}{slot}host", check=False).returncode == 0:
        ip("link", "del", f"{PREFIX}{slot}host", check=False)
        removed.append(f"{PREFIX}{slot}host")
    if removed and stale:
        log.warning("removed a dead lab run's leftovers: %s", ", ".join(removed))
    return removed


def acquire_slot() -> tuple[int, int]:
    """(slot, locked file descriptor): the first slot no living lab holds, cleaned of a dead run's leftovers."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    for slot in range(SLOTS):
        fd = os.open(STATE_DIR / f"slot-{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        clean_stale(slot)
        return slot, fd
    raise RuntimeError(f"all {SLOTS} lab slots are in use")


@dataclass(frozen=True)
class Host:
    name: str
    namespace: str
    address: str

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host's namespace (``ip netns exec`` execs it: the pid is the program's)."""
        return ["ip", "netns", "exec", self.namespace, *argv]


@dataclass
class Network:
    """The bridge, the hosts and the machine's veth into the bridge of one slot."""

    slot: int
    hosts: dict[str, Host] = field(default_factory=dict)

    @property
    def bridge_ns(self) -> str:
        return f"{PREFIX}{self.slot}-net"

    @property
    def gateway(self) -> str:
        """The machine's own address on the lab's bridge: where the test process's connections come from."""
        return f"{SUBNET}.{self.slot}.1"

    def create(self) -> None:
        ip("netns", "add", self.bridge_ns)
        ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        ip("-n", self.bridge_ns, "link", "set", "br0", "up")
        outside, inside = f"{PREFIX}{self.slot}host", f"{PREFIX}{self.slot}hostp"
        ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        ip("link", "set", inside, "netns", self.bridge_ns)
        ip("-n", self.bridge_ns, "link", "set", inside, "master", "br0", "up")
        ip("addr", "add", f"{self.gateway}/24", "dev", outside)
        ip("link", "set", outside, "up")

    def add_host(self, name: str) -> Host:
        """A namespace with ``eth0`` on the bridge and the next free address."""
        address = f"{SUBNET}.{self.slot}.{FIRST_HOST + len(self.hosts)}"
        host = Host(name, f"{PREFIX}{self.slot}-{name}", address)
        ip("netns", "add", host.namespace)
        a, b = f"o{self.slot}{name}a", f"o{self.slot}{name}b"
        ip("link", "add", a, "type", "veth", "peer", "name", b)
        ip("link", "set", a, "netns", self.bridge_ns)
        ip("-n", self.bridge_ns, "link", "set", a, "master", "br0", "up")
        ip("link", "set", b, "netns", host.namespace)
        ip("-n", host.namespace, "link", "set", b, "name", "eth0")
        ip("-n", host.namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", host.namespace, "link", "set", "eth0", "up")
        ip("-n", host.namespace, "link", "set", "lo", "up")
        self.hosts[name] = host
        return host

    def destroy(self) -> None:
        clean_stale(self.slot, stale=False)
        self.hosts.clear()
