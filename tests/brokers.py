"""Real odradek brokers as subprocesses on random loopback ports, shared by every test folder.

Tests import from here (``from brokers import BrokerProcess, wait_for``), never from ``conftest``: several folders
have a conftest of their own, and which one a bare ``import conftest`` finds depends on collection order.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from odradek.ready_file import read_ready_file

READY_TIMEOUT_S = 60.0


# A broker whose only listener is SASL_PLAINTEXT: admin logs in with PLAIN (its JAAS on the listener), and SCRAM
# users can be added; failed logins are answered without Kafka's delay.
PLAIN_ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                    'password="admin-secret" user_admin="admin-secret";')
SASL_PLAINTEXT_ARGS = [
    "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
    "--override", "inter.broker.listener.name=SASL_PLAINTEXT",
    "--override", "sasl.mechanism.inter.broker.protocol=PLAIN",
    "--override", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_ADMIN_JAAS}",
    "--override", "group.initial.rebalance.delay.ms=0",
    "--override", "connection.failed.authentication.delay.ms=10",
]

def wait_for(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.05, what: str = "") -> object:
    """Poll ``predicate`` until it returns something truthy; fail the test with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


class BrokerProcess:
    """One ``odradek up`` process; restarts reuse the data directory and, when it can, the port."""

    def __init__(self, data_dir: Path, extra_args: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.extra_args = list(extra_args or [])
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"
        self.bootstrap = ""
        self.listeners: dict[str, str] = {}

    def start(self) -> BrokerProcess:
        ready = self.data_dir.parent / f"{self.data_dir.name}.ready"
        ready.unlink(missing_ok=True)
        cmd = [
            sys.executable, "-m", "odradek", "up",
            "--port", str(self.port), "--data-dir", str(self.data_dir), "--ready-file", str(ready),
            "--schema-registry-port", "none", *self.extra_args,
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()

        def is_ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"broker exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}")
            return ready.exists() and ready.read_text().strip().startswith("bootstrap.servers=")

        wait_for(is_ready, READY_TIMEOUT_S, what="broker ready file")
        # one endpoint per line; with `listeners` set, one `bootstrap.servers.<LISTENER>=` line each
        endpoints = read_ready_file(ready)
        self.bootstrap = endpoints["bootstrap.servers"]
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        prefix = "bootstrap.servers."
        self.listeners = {k.removeprefix(prefix): v for k, v in endpoints.items() if k.startswith(prefix)}
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        return code

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def raw_socket(broker: BrokerProcess) -> socket.socket:
    """A plain TCP connection to the broker, for frames no client would send."""
    host, port = broker.bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def peer_closed(sock: socket.socket) -> bool:
    """Whether the broker closed this connection (what it does to a request it cannot parse)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


class ZooKeeperBroker:
    """One ``odradek broker --zookeeper`` process; restarts keep its id, data directory and port.

    Its files are ``<base>/<name>-<id>`` (data), ``.ready`` and ``.log`` beside it; ``overrides`` are broker configs
    by Kafka's names."""

    def __init__(self, broker_id: int, zookeeper: str, base: Path, overrides: Mapping[str, str] | None = None,
                 *, rack: str | None = None, name: str = "broker") -> None:
        self.broker_id = broker_id
        self.zookeeper = zookeeper
        self.overrides = dict(overrides or {})
        self.rack = rack
        self.data_dir = base / f"{name}-{broker_id}"
        self.ready = base / f"{name}-{broker_id}.ready"
        self.log_path = base / f"{name}-{broker_id}.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ZooKeeperBroker:
        self.ready.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(self.broker_id), "--zookeeper", self.zookeeper,
               "--port", str(self.port), "--data-dir", str(self.data_dir), "--ready-file", str(self.ready),
               *(["--rack", self.rack] if self.rack else [])]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         env=dict(os.environ, PYTHONUNBUFFERED="1"))

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"broker {self.broker_id} exited: {self.log_text()[-3000:]}")
            return self.ready.exists()

        wait_for(ready, 90, what=f"broker {self.broker_id} ready")
        self.port = int(self.ready.read_text().splitlines()[0].rsplit(":", 1)[1])
        return self

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int = signal.SIGTERM) -> None:
        """Send ``sig`` (SIGTERM: a controlled shutdown; SIGKILL: a crash) and wait for the process to end."""
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(sig)
            self.proc.wait(90)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
