"""A throwaway standalone ZooKeeper on loopback, for tests, benchmarks and single-machine trials.

It runs Debian's ZooKeeper 3.8 (package ``zookeeper``) with ``java`` directly rather than through
``zkServer.sh``, so it needs no writable /var and no fixed port: a random free loopback port, a private data
directory, the admin HTTP server off, and only the ``ruok``/``srvr`` four-letter words enabled (``ruok``
is how readiness is detected).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["DEFAULT_JAR", "LocalZooKeeper", "four_letter_word", "java_command"]

DEFAULT_JAR = Path("/usr/share/java/zookeeper.jar")
"""Its manifest's Class-Path names the other jars it needs (netty, jute, slf4j, ...) under /usr/share/java."""
DEFAULT_CONF_DIR = Path("/etc/zookeeper/conf")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter_word(port: int, word: bytes, host: str = "127.0.0.1") -> bytes:
    with socket.create_connection((host, port), timeout=2) as s:
        s.sendall(word)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


def java_command(main_class: str, *, heap_mb: int, quick_start: bool, jar: Path = DEFAULT_JAR) -> list[str]:
    """``java`` running one of ZooKeeper's main classes from Debian's jars (the lab's ensemble uses it too)."""
    java = shutil.which("java")
    if java is None or not jar.exists():
        raise RuntimeError(f"need a JRE and Debian's zookeeper package ({jar}); see `make sysdeps`")
    args = [java, f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-Dzookeeper.jmx.log4j.disable=true"]
    if quick_start:
        args.append("-XX:TieredStopAtLevel=1")  # C1 only: starts faster, runs slower
    return [*args, "-cp", f"{DEFAULT_CONF_DIR}:{jar}", main_class]


class LocalZooKeeper:
    """One standalone ZooKeeper process; :attr:`hosts` is its connect string once :meth:`start` returns."""

    def __init__(
        self,
        base_dir: Path,
        *,
        heap_mb: int = 256,
        quick_start: bool = True,
        jar: Path = DEFAULT_JAR,
        start_deadline_s: float = 60.0,
    ) -> None:
        self.base_dir = base_dir
        self.heap_mb = heap_mb
        self.quick_start = quick_start  # C1 only: starts faster, runs slower (fine for tests, not benchmarks)
        self.jar = jar
        self.start_deadline_s = start_deadline_s
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.base_dir / f"zookeeper-{self.port}.log"

    def start(self) -> LocalZooKeeper:
        """Start the server; a no-op while it runs (``with LocalZooKeeper(d).start() as zk`` started a second one
        and leaked the first)."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        for _attempt in range(3):  # the probed port can be taken before ZooKeeper binds it: try another
            self.port = _free_port()
            data = self.base_dir / f"data-{self.port}"
            data.mkdir(parents=True)
            cfg = self.base_dir / f"zoo-{self.port}.cfg"
            cfg.write_text(
                f"tickTime=500\ndataDir={data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                "minSessionTimeout=1000\nmaxSessionTimeout=60000\nmaxClientCnxns=0\n"
                "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\nforceSync=no\n"
            )
            args = java_command("org.apache.zookeeper.server.ZooKeeperServerMain", heap_mb=self.heap_mb,
                                quick_start=self.quick_start, jar=self.jar)
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    [*args, str(cfg)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            if self._wait_ready():
                return self
            self.stop()
        raise RuntimeError(f"ZooKeeper did not start; see {self.base_dir}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_deadline_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False
            with contextlib.suppress(OSError):
                if four_letter_word(self.port, b"ruok") == b"imok":
                    return True
            time.sleep(0.1)
        return False

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far (Linux ``/proc``), so a benchmark can split the cost."""
        if self.proc is None:
            return 0.0
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def __enter__(self) -> LocalZooKeeper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
