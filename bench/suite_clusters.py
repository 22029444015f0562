"""Three-broker clusters for the clients' own suites: odradek or Apache Kafka 3.9, in ZooKeeper mode, each broker
with its own settings (kafkajs's have three listeners each, PLAINTEXT, SSL and SASL_SSL, on fixed ports; librdkafka's
have trivup's settings and one rack per broker).

Fixed ports are a namespace's, never the host's: :func:`namespace` creates a namespace with only its loopback up,
and the caller re-runs itself inside it (``ip netns exec``); everything started there (ZooKeeper, the brokers, the
suite's runner) shares that loopback. The same settings start odradek (``odradek broker`` in ZooKeeper mode, one
process per broker, so each broker gets its own ``listeners``) or Apache Kafka 3.9 (:class:`KafkaCluster`), so a
test failing on one can be run against the other in the same harness.

The certificates are made with ``openssl`` at run time in the work directory (a throwaway CA and one server
certificate for ``localhost``/``127.0.0.1``), served as PEM stores, which both odradek and Kafka read.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from odradek.apache_kafka import KAFKA_3, KafkaBroker, KafkaCluster, jars, java_command
from odradek.coordination.localzk import LocalZooKeeper
from odradek.ready_file import read_ready_file

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT_S = 120.0

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="test" password="testtest" '
              'user_test="testtest" user_bob="bobbob" user_alice="alicealice";')
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required;'


def make_certificates(directory: Path) -> Path:
    """A throwaway CA and a server certificate it signs (``localhost`` and 127.0.0.1); returns the PEM key store
    (unencrypted PKCS#8 key + certificate chain). The CA is ``ca.pem`` beside it."""
    directory.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=odradek-suites-ca")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", "/CN=localhost")
    (directory / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "san.ext")
    keystore = directory / "keystore.pem"
    keystore.write_text((directory / "server.key").read_text() + (directory / "server.pem").read_text()
                        + (directory / "ca.pem").read_text())
    return keystore


def listener_settings(first_port: int, keystore: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """One broker's listeners (PLAINTEXT, SSL, SASL_SSL on ``first_port`` and the next two, advertised as
    ``localhost``), its PEM key store and SASL mechanisms (PLAIN users from the JAAS text, SCRAM users set later
    through AlterUserScramCredentials), plus ``extra``."""
    p = first_port
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{p},SSL://127.0.0.1:{p + 1},SASL_SSL://127.0.0.1:{p + 2}",
        "advertised.listeners": f"PLAINTEXT://localhost:{p},SSL://localhost:{p + 1},SASL_SSL://localhost:{p + 2}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        **extra,
    }


@contextlib.contextmanager
def namespace(name: str) -> Iterator[str]:
    """A network namespace with its loopback up; on exit every process still in it is killed and it is deleted."""
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, capture_output=True)
        yield name
    finally:
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


class OdradekZkCluster:
    """``odradek broker`` processes (ids 0..n-1) on a ZooKeeper of their own, each with its own ``settings``."""

    def __init__(self, work: Path, settings: list[dict[str, str]]) -> None:
        self.work = work
        self.settings = settings
        self.zookeeper = LocalZooKeeper(work / "zookeeper")
        self.procs: list[subprocess.Popen[bytes]] = []
        self.readies: list[Path] = []

    def start(self) -> OdradekZkCluster:
        self.zookeeper.start()
        for broker_id, settings in enumerate(self.settings):
            ready = self.work / f"broker-{broker_id}.ready"
            ready.unlink(missing_ok=True)
            cmd = [sys.executable, "-m", "odradek", "broker", "--id", str(broker_id),
                   "--zookeeper", f"{self.zookeeper.hosts}/odradek", "--port", "0",
                   "--data-dir", str(self.work / f"data-{broker_id}"), "--ready-file", str(ready)]
            for key, value in settings.items():
                cmd += ["--override", f"{key}={value}"]
            log = (self.work / f"broker-{broker_id}.log").open("wb")
            env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
            self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                               start_new_session=True))
            self.readies.append(ready)
        deadline = time.monotonic() + READY_TIMEOUT_S
        for proc, ready in zip(self.procs, self.readies, strict=True):
            while not (ready.exists() and read_ready_file(ready)):
                if proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"odradek broker not ready; see {self.work}")
                time.sleep(0.2)
        return self

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []
        self.zookeeper.stop()


class PerBrokerKafka(KafkaCluster):
    """Apache Kafka 3.9 in ZooKeeper mode with each broker's own ``settings`` on top of :class:`KafkaCluster`'s
    (fixed ``listeners`` there replace the one free-port PLAINTEXT listener it gives each broker)."""

    def __init__(self, work: Path, settings: list[dict[str, str]]) -> None:
        super().__init__(work, version=KAFKA_3, brokers=len(settings), heap_mb=768)
        self.per_broker = settings
        for broker, own in zip(self.brokers, settings, strict=True):
            if "listeners" in own:  # readiness probes the first listener's port
                broker.port = int(own["listeners"].split(",")[0].rsplit(":", 1)[1])

    def _config(self, broker: KafkaBroker) -> dict[str, object]:
        return super()._config(broker) | self.per_broker[broker.node_id - 1]


def start_cluster(kind: str, work: Path, settings: list[dict[str, str]]) -> OdradekZkCluster | KafkaCluster:
    """``kind`` is ``odradek`` or ``kafka``; one broker per item of ``settings``."""
    work.mkdir(parents=True, exist_ok=True)
    if kind == "odradek":
        return OdradekZkCluster(work, settings).start()
    return PerBrokerKafka(work, settings).start()


def bootstrap(cluster: OdradekZkCluster | KafkaCluster) -> str:
    """Every broker's first advertised listener, ``host:port,...``."""
    if isinstance(cluster, KafkaCluster):
        return cluster.bootstrap_servers
    return ",".join(read_ready_file(ready)["bootstrap.servers"] for ready in cluster.readies)


# The Kafka distribution's scripts that suites run from $KAFKA_PATH/bin, and the main class each one runs.
KAFKA_SCRIPTS = {
    "kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs.sh": "kafka.admin.ConfigCommand",
    "kafka-acls.sh": "kafka.admin.AclCommand",
    "kafka-run-class.sh": "",
}


def kafka_path(directory: Path) -> Path:
    """A stand-in for a Kafka distribution's directory: ``bin/`` holds the scripts suites call (``KAFKA_SCRIPTS``),
    each running Kafka 3.9's main class from the Maven jars with ``$CLASSPATH`` first, as the real scripts do
    (``kafka-run-class.sh`` takes the class as its first argument); ``libs/`` is those jars."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    libs = directory / "libs"
    if not libs.exists():
        libs.symlink_to(jars.ensure(KAFKA_3))
    for script, main_class in KAFKA_SCRIPTS.items():
        argv = java_command(KAFKA_3, main_class or "kafka-run-class")
        argv = argv if main_class else argv[:-1]
        cp = argv.index("-cp") + 1
        quoted = [shlex.quote(a) for a in argv]
        quoted[cp] = f'"${{CLASSPATH:+$CLASSPATH:}}"{quoted[cp]}'
        command = " ".join(quoted)
        path = bin_dir / script
        path.write_text(f"#!/bin/sh\nexec {command} \"$@\"\n")
        path.chmod(0o755)
    return directory


def add_scram_user(bootstrap: str, user: str, sha256: str, sha512: str, iterations: int = 8192) -> None:
    """SCRAM credentials through AlterUserScramCredentials (odradek's kafka-configs, either cluster), as kafkajs's
    scripts/createScramCredentials.sh adds them."""
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(
            [sys.executable, "-m", "odradek", "configs", "--bootstrap-server", bootstrap, "--alter",
             "--entity-type", "users", "--entity-name", user, "--add-config",
             f"SCRAM-SHA-256=[iterations={iterations},password={sha256}],SCRAM-SHA-512=[password={sha512}]"],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        if out.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"could not add SCRAM user {user}: {out.stdout}{out.stderr}")
        time.sleep(1)
