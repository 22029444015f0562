"""The lab's servers: ZooKeeper ensemble members and ``odradek broker`` processes, each inside its host's namespace.

Each server keeps its host (so its address), its data directory and its port across restarts, as a machine
would. ``ip netns exec`` execs the program after entering the namespace, so the child's pid is the server's own
and SIGKILL, SIGSTOP and SIGCONT reach it directly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from odradek.coordination.localzk import four_letter_word, java_command
from odradek.lab.netns import Host

__all__ = ["BROKER_PORT", "ZK_CLIENT_PORT", "LabBroker", "LabZooKeeper", "Server", "wait_until"]

ZK_CLIENT_PORT = 2181
ZK_PEER_PORT = 2888
ZK_ELECTION_PORT = 3888
BROKER_PORT = 9092  # each broker has its host's whole port space: Kafka's port, as on a real machine


def wait_until(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1) -> object:
    """Poll until ``predicate`` is truthy; a TimeoutError naming ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class Server:
    """One process in a host's namespace, with the signals the nemesis sends."""

    name = "server"

    def __init__(self, host: Host, base_dir: Path) -> None:
        self.host = host
        self.base_dir = base_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    @property
    def log_path(self) -> Path:
        return self.base_dir / f"{self.name}.log"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def argv(self) -> Sequence[str]:
        raise NotImplementedError

    def spawn(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            out.write(f"\n===== {self.name} starting at {time.strftime('%H:%M:%S')} =====\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                self.host.command(self.argv()), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        self.paused = False

    def signal(self, sig: int) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no flush, no goodbye; the ZooKeeper session is left to expire."""
        if self.proc is not None:
            self.signal(signal.SIGKILL)
            self.proc.wait(30)
        self.paused = False

    def terminate(self, timeout: float = 60) -> None:
        """SIGTERM and wait (a broker's controlled shutdown); SIGKILL if it does not end in time."""
        if self.proc is None:
            return
        if self.paused:
            self.resume()
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""


class LabZooKeeper(Server):
    """One member (``myid``) of the ensemble, quorum and leader election included."""

    def __init__(self, myid: int, host: Host, base_dir: Path, ensemble: dict[int, str], heap_mb: int = 128) -> None:
        super().__init__(host, base_dir)
        self.myid = myid
        self.name = f"zk{myid}"
        self.ensemble = ensemble
        self.heap_mb = heap_mb

    def argv(self) -> Sequence[str]:
        data = self.base_dir / f"{self.name}-data"
        data.mkdir(parents=True, exist_ok=True)
        (data / "myid").write_text(f"{self.myid}\n")
        servers = "" if len(self.ensemble) == 1 else "".join(  # one server: standalone, no quorum to form
            f"server.{sid}={addr}:{ZK_PEER_PORT}:{ZK_ELECTION_PORT}\n" for sid, addr in sorted(self.ensemble.items()))
        cfg = self.base_dir / f"{self.name}.cfg"
        # tickTime 500 ms: a follower out of touch for syncLimit ticks (2 s) is dropped, an election settles in
        # about a second; sessions may be as short as two ticks allow (the brokers ask for a few seconds).
        cfg.write_text(
            f"tickTime=500\ninitLimit=20\nsyncLimit=4\ndataDir={data}\nclientPort={ZK_CLIENT_PORT}\n"
            f"clientPortAddress={self.host.address}\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n"
            "maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\nforceSync=no\n"
            f"{servers}"
        )
        main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
        return [*java_command(main, heap_mb=self.heap_mb, quick_start=True), str(cfg)]

    def start(self) -> LabZooKeeper:
        self.spawn()
        return self

    def mode(self) -> str | None:
        """``leader``, ``follower`` or None when it is down or not serving (no quorum)."""
        if not self.alive or self.paused:
            return None
        try:
            answer = four_letter_word(ZK_CLIENT_PORT, b"srvr", host=self.host.address)
        except OSError:
            return None
        for line in answer.decode(errors="replace").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    @property
    def connect(self) -> str:
        return f"{self.host.address}:{ZK_CLIENT_PORT}"


class LabBroker(Server):
    """``odradek broker --zookeeper ENSEMBLE --host ADDR --port 9092`` in its host's namespace."""

    def __init__(self, broker_id: int, host: Host, base_dir: Path, zookeeper: str,
                 overrides: dict[str, str]) -> None:
        super().__init__(host, base_dir)
        self.broker_id = broker_id
        self.name = f"broker{broker_id}"
        self.zookeeper = zookeeper
        self.overrides = overrides

    @property
    def ready_file(self) -> Path:
        return self.base_dir / f"{self.name}.ready"

    @property
    def address(self) -> str:
        return f"{self.host.address}:{BROKER_PORT}"

    def argv(self) -> Sequence[str]:
        cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(self.broker_id), "--zookeeper", self.zookeeper,
               "--host", self.host.address, "--port", str(BROKER_PORT),
               "--data-dir", str(self.base_dir / f"{self.name}-data"), "--ready-file", str(self.ready_file)]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def spawn(self) -> None:
        self.ready_file.unlink(missing_ok=True)
        super().spawn()

    def ready(self) -> bool:
        if not self.alive:
            raise RuntimeError(f"{self.name} exited while starting:\n{self.log_tail()}")
        return self.ready_file.exists()

    def start(self, timeout: float = 60) -> LabBroker:
        self.spawn()
        wait_until(self.ready, timeout, f"{self.name} ready")
        return self
