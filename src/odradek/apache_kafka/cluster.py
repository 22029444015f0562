"""Real Apache Kafka brokers on loopback, for tests and benches beside odradek.

3.x runs in ZooKeeper mode on the ZooKeeper connect string it is given, under a chroot of its own (so clusters can
share one ZooKeeper) or under a given one with given broker ids (to join brokers of another kind already there, as a
mixed cluster does); without one it starts a :class:`~odradek.coordination.localzk.LocalZooKeeper` of its own.
4.x runs in KRaft combined mode (every node is a broker and a voter), each log directory formatted with
``kafka.tools.StorageTool`` first.

The properties are Kafka's ``config/server.properties`` development settings (one partition by default, no initial
rebalance delay), with the internal topics' replication factor and ``min.insync.replicas`` sized to the cluster.
Every listener is on 127.0.0.1, on ports the OS handed out. A broker is ready when its listener accepts a connection
and its log has the line Kafka writes at the end of start-up (``[KafkaServer id=N] started`` in ZooKeeper mode,
``Kafka Server started`` in KRaft mode). The log of each broker is ``<base_dir>/broker-<id>/server.log``.
"""

from __future__ import annotations

import base64
import contextlib
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from odradek.apache_kafka import jvm
from odradek.coordination.localzk import LocalZooKeeper

__all__ = ["KafkaBroker", "KafkaCluster", "free_port", "kill_process", "stop_process"]

_STARTED_LINES = ("started (kafka.server.KafkaServer)", "Kafka Server started (kafka.server.KafkaRaftServer)")


def free_port() -> int:
    """A port the OS hands out on 127.0.0.1 (free when probed; the broker binding it later may still lose a race)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float) -> None:
    """SIGTERM a JVM this module started (its shutdown hooks run), then SIGKILL if it outlives ``grace_s``."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            kill_process(proc)


def kill_process(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL (``kill -9``) a JVM this module started, and reap it."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(30)


def random_cluster_id() -> str:
    """A cluster id as Kafka's ``Uuid.randomUuid`` makes one: 22 url-safe base64 characters, never starting with
    ``-``, which ``kafka-storage format -t`` would take for an option (1 start in 64 failed before)."""
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _properties(values: Mapping[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def _kraft(version: str) -> bool:
    return not version.startswith(("2.", "3."))


class KafkaBroker:
    """One broker process; :meth:`start` after :meth:`stop` or :meth:`kill` brings it back on the same port and log."""

    def __init__(self, cluster: KafkaCluster, node_id: int, port: int, controller_port: int) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.port = port
        self.controller_port = controller_port  # KRaft's CONTROLLER listener; 0 in ZooKeeper mode
        self.home = cluster.base_dir / f"broker-{node_id}"
        self.log_dir = self.home / "data"
        self.config_path = self.home / "server.properties"
        self.server_log = self.home / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        """Start the JVM without waiting for it (:meth:`start` waits; a cluster starts all, then waits for all)."""
        if self.running():
            return
        self._log_offset = self.server_log.stat().st_size if self.server_log.exists() else 0
        command = jvm.java_command(
            self.cluster.version, "kafka.Kafka", str(self.config_path), heap_mb=self.cluster.heap_mb,
            quick_start=self.cluster.quick_start, log="server",
            jvm_options=[f"-Dkafka.logs.dir={self.home}"],
        )
        with open(self.server_log, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, deadline_s: float) -> None:
        """Until the listener accepts and the log says the server started; raises with the log's tail otherwise."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise RuntimeError(f"Kafka broker {self.node_id} exited during start-up:\n{self._tail()}")
            if self._started_logged() and _accepts(self.port):
                return
            time.sleep(0.2)
        raise RuntimeError(f"Kafka broker {self.node_id} not ready after {deadline_s:.0f}s:\n{self._tail()}")

    def _started_logged(self) -> bool:
        with open(self.server_log, "rb") as f:
            f.seek(self._log_offset)
            text = f.read().decode(errors="replace")
        return any(line in text for line in _STARTED_LINES)

    def _tail(self, lines: int = 40) -> str:
        if not self.server_log.exists():
            return "(no log)"
        return "\n".join(self.server_log.read_text(errors="replace").splitlines()[-lines:])

    def start(self, deadline_s: float = 120.0) -> KafkaBroker:
        self.spawn()
        self.wait_ready(deadline_s)
        return self

    def stop(self, grace_s: float = 60.0) -> None:
        """SIGTERM (a controlled shutdown in ZooKeeper mode), then SIGKILL if it outlives ``grace_s``."""
        stop_process(self.proc, grace_s)
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: a crash, no controlled shutdown, the log left unflushed as it was."""
        kill_process(self.proc)
        self.proc = None


class KafkaCluster:
    """``brokers`` Apache Kafka ``version`` brokers under ``base_dir``; a context manager (``with ... .start()``).
    ``racks``, one per broker in id order, sets each one's ``broker.rack``."""

    def __init__(
        self,
        base_dir: Path,
        *,
        version: str,
        brokers: int = 1,
        zookeeper: str | None = None,
        overrides: Mapping[str, object] | None = None,
        racks: Sequence[str] | None = None,
        heap_mb: int = 512,
        quick_start: bool = True,
        start_deadline_s: float = 180.0,
        chroot: str | None = None,
        broker_ids: Sequence[int] | None = None,
    ) -> None:
        """``chroot`` (ZooKeeper mode): a path other brokers already use, to join their cluster instead of a chroot of
        its own; ``broker_ids``: the brokers' ids (``1 .. brokers`` when not given), so they can sit beside brokers
        of another kind that hold other ids."""
        if broker_ids is not None:
            brokers = len(broker_ids)
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        if racks and len(racks) != brokers:
            raise ValueError(f"give one rack per broker ({brokers}), not {len(racks)}")
        if chroot is not None and not chroot.startswith("/"):
            raise ValueError(f"a chroot is an absolute ZooKeeper path, not {chroot!r}")
        self.racks = list(racks or [])
        self.base_dir = Path(base_dir)
        self.version = version
        self.kraft = _kraft(version)
        self.zookeeper = zookeeper
        self.overrides = dict(overrides or {})
        self.heap_mb = heap_mb
        self.quick_start = quick_start
        self.start_deadline_s = start_deadline_s
        self.chroot = chroot or f"/kafka-{uuid.uuid4().hex[:12]}"
        self.cluster_id = random_cluster_id()
        self._own_zookeeper: LocalZooKeeper | None = None
        self.brokers: list[KafkaBroker] = [
            KafkaBroker(self, node_id, free_port(), free_port() if self.kraft else 0)
            for node_id in (broker_ids or range(1, brokers + 1))
        ]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers)

    @property
    def zookeeper_connect(self) -> str:
        """The connect string with this cluster's chroot (ZooKeeper mode only), as ``zookeeper.connect`` has it."""
        if self.kraft or self.zookeeper is None:
            raise RuntimeError("not a ZooKeeper-mode cluster, or not started")
        return f"{self.zookeeper}{self.chroot}"

    def broker(self, node_id: int) -> KafkaBroker:
        return next(b for b in self.brokers if b.node_id == node_id)

    def _config(self, broker: KafkaBroker) -> dict[str, object]:
        n = len(self.brokers)
        config: dict[str, object] = {
            "num.partitions": 1,
            "offsets.topic.replication.factor": min(3, n),
            "transaction.state.log.replication.factor": min(3, n),
            "transaction.state.log.min.isr": min(2, n),
            "group.initial.rebalance.delay.ms": 0,
            "log.dirs": broker.log_dir,
            "advertised.listeners": f"PLAINTEXT://{broker.address}",
        }
        if self.kraft:
            config |= {
                "process.roles": "broker,controller",
                "node.id": broker.node_id,
                "controller.quorum.voters": ",".join(
                    f"{b.node_id}@127.0.0.1:{b.controller_port}" for b in self.brokers
                ),
                "listeners": f"PLAINTEXT://{broker.address},CONTROLLER://127.0.0.1:{broker.controller_port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            }
        else:
            config |= {
                "broker.id": broker.node_id,
                "listeners": f"PLAINTEXT://{broker.address}",
                "zookeeper.connect": self.zookeeper_connect,
                "zookeeper.connection.timeout.ms": 18000,
            }
        if self.racks:
            config["broker.rack"] = self.racks[self.brokers.index(broker)]
        return config | self.overrides

    def _format(self, broker: KafkaBroker) -> None:
        result = jvm.run_tool(
            self.version, "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", str(broker.config_path),
            "--ignore-formatted", timeout=120,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"kafka-storage format failed for node {broker.node_id}:\n{result.stdout}{result.stderr}"
            )

    def start(self) -> KafkaCluster:
        """Write each broker's properties (formatting KRaft storage), start every broker, and wait for all."""
        if not self.kraft and self.zookeeper is None:
            self._own_zookeeper = LocalZooKeeper(self.base_dir / "zookeeper").start()
            self.zookeeper = self._own_zookeeper.hosts
        try:
            for broker in self.brokers:
                broker.home.mkdir(parents=True, exist_ok=True)
                broker.config_path.write_text(_properties(self._config(broker)))
                if self.kraft:
                    self._format(broker)
            for broker in self.brokers:
                broker.spawn()
            for broker in self.brokers:
                broker.wait_ready(self.start_deadline_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every broker (each gets SIGTERM at once, then SIGKILL after the grace) and an own ZooKeeper."""
        for broker in self.brokers:
            if broker.running() and broker.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    broker.proc.send_signal(signal.SIGTERM)
        for broker in self.brokers:
            broker.stop()
        self._stop_own_zookeeper()

    def kill(self) -> None:
        """SIGKILL every broker: the quick end for a test session, whose logs are thrown away."""
        for broker in self.brokers:
            broker.kill()
        self._stop_own_zookeeper()

    def _stop_own_zookeeper(self) -> None:
        if self._own_zookeeper is not None:
            self._own_zookeeper.stop()
            self._own_zookeeper = None

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
