"""``odradek broker`` on a real ZooKeeper with two listeners: the ready file has one line per listener, and
``/brokers/ids/0`` holds every endpoint and the protocol map as Kafka writes them (read back with kazoo)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from security_helpers import PLAIN_JAAS, plain_token, sasl_connection

from brokers import wait_for
from odradek.coordination.localzk import LocalZooKeeper
from odradek.errors import ErrorCode

pytestmark = [pytest.mark.zookeeper, pytest.mark.timeout(180)]


def test_zookeeper_broker_registers_every_listener(tmp_path: Path) -> None:
    server = LocalZooKeeper(tmp_path / "zookeeper").start()
    ready = tmp_path / "ready"
    cmd = [sys.executable, "-m", "odradek", "broker", "--id", "0", "--zookeeper", f"{server.hosts}/sec",
           "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready),
           "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
           "--override", "sasl.enabled.mechanisms=PLAIN",
           "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}"]
    with open(tmp_path / "broker.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    zk = KazooClient(hosts=f"{server.hosts}/sec")
    try:
        wait_for(lambda: ready.exists() or proc.poll() is not None, 90, what="the ready file")
        lines = ready.read_text().splitlines()
        assert len(lines) == 3, lines
        first, sasl, plain = lines
        assert sasl.startswith("bootstrap.servers.SASL_PLAINTEXT=") and plain.startswith("bootstrap.servers.PLAINTEXT=")
        assert first == "bootstrap.servers=" + sasl.split("=", 1)[1]  # the ready line names the first listener
        sasl_address, plain_address = sasl.split("=", 1)[1], plain.split("=", 1)[1]
        zk.start(timeout=30)
        doc = json.loads(zk.get("/brokers/ids/0")[0])
        assert doc["endpoints"] == [f"SASL_PLAINTEXT://{sasl_address}", f"PLAINTEXT://{plain_address}"]
        assert doc["listener_security_protocol_map"] == {"SASL_PLAINTEXT": "SASL_PLAINTEXT", "PLAINTEXT": "PLAINTEXT"}
        assert f"{doc['host']}:{doc['port']}" == plain_address  # host/port: the PLAINTEXT endpoint, as Kafka's
        conn = sasl_connection(sasl_address)
        conn.handshake("PLAIN")
        assert conn.authenticate(plain_token("alice", "alice-secret")).error_code == ErrorCode.none
        assert [f"{h}:{p}" for _n, h, p in conn.metadata_brokers()] == [sasl_address]
    finally:
        zk.stop()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
        server.stop()
