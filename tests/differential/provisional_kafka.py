"""PROVISIONAL: a one-broker Kafka 3.9 on /tmp/mvntest/lib until wip-kafka-harness lands (then deleted)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ProvisionalKafka:
    def __init__(self, base_dir: Path, zk_hosts: str, lib: Path = Path("/tmp/mvntest/lib")) -> None:
        self.base_dir = base_dir
        self.zk_hosts = zk_hosts
        self.lib = lib
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> ProvisionalKafka:
        self.port = _free_port()
        props = self.base_dir / "server.properties"
        props.write_text(
            f"broker.id=1\nzookeeper.connect={self.zk_hosts}/kafka39\nlisteners=PLAINTEXT://127.0.0.1:{self.port}\n"
            f"log.dirs={self.base_dir / 'logs'}\noffsets.topic.replication.factor=1\n"
            "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\nnum.partitions=1\n")
        (self.base_dir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, stdout\nlog4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n")
        log = open(self.base_dir / "kafka.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                      f"-Dlog4j.configuration=file:{self.base_dir}/log4j.properties",
                                      "-cp", f"{self.lib}/*", "kafka.Kafka", str(props)],
                                     stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if "started (kafka.server.KafkaServer)" in (self.base_dir / "kafka.log").read_text(errors="replace"):
                return self
            assert self.proc.poll() is None, "kafka exited"
            time.sleep(0.2)
        raise RuntimeError("kafka did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
