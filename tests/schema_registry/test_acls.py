"""The registry's own access to ``_schemas`` and its election group, checked by the cluster's ACL authorizer: a
principal without the ACLs gets one clear log line and Confluent's 50xxx codes over HTTP, and the same running
registry works once an operator grants them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from brokers import BrokerProcess, wait_for
from odradek.ready_file import read_ready_file
from odradek.schema_registry.election import GROUP

pytestmark = pytest.mark.timeout(240)

USERS = {"admin": "admin-secret", "registry": "registry-secret"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" ' + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


def _conf(broker: BrokerProcess, user: str) -> dict[str, str]:
    return {"bootstrap.servers": broker.listeners["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[BrokerProcess, AdminClient]]:
    broker = BrokerProcess(tmp_path / "broker", [
        "--override", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--override", "sasl.enabled.mechanisms=PLAIN",
        "--override", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
        "--override", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "--override", "super.users=User:admin;User:ANONYMOUS",
        "--override", "group.initial.rebalance.delay.ms=0",
        "--override", "offsets.topic.replication.factor=1",
    ]).start()
    admin = AdminClient(_conf(broker, "admin"))
    # the operator makes the topic, as Confluent's docs advise when the registry may not create topics
    admin.create_topics([NewTopic("_schemas", 1, 1, config={"cleanup.policy": "compact"})])["_schemas"].result(30)
    try:
        yield broker, admin
    finally:
        broker.stop()


def _http(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                      headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=90) as resp:
            return int(resp.status), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return int(exc.code), json.loads(exc.read())


def _grant(admin: AdminClient, *bindings: tuple[ResourceType, str, AclOperation]) -> None:
    acls = [AclBinding(kind, name, ResourcePatternType.LITERAL, "User:registry", "*", operation,
                       AclPermissionType.ALLOW) for kind, name, operation in bindings]
    for future in admin.create_acls(acls, request_timeout=30).values():
        future.result()


def test_the_registry_needs_acls_on_its_topic_and_group(secured: tuple[BrokerProcess, AdminClient],
                                                        tmp_path: Path) -> None:
    broker, admin = secured
    config = tmp_path / "registry.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                      'username="registry" password="registry-secret";\n')
    ready, log_path = tmp_path / "sr.ready", tmp_path / "sr.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "odradek", "schema-registry", "--bootstrap-server",
                                 broker.listeners["SASL_PLAINTEXT"], "--command-config", str(config), "--port", "0",
                                 "--ready-file", str(ready)], stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        wait_for(lambda: ready.exists() and ready.read_text().strip(), 90, what="the registry's ready file")
        url = read_ready_file(ready)["schema.registry.url"]
        status, body = _http(f"{url}/subjects")
        assert (status, body["error_code"]) == (500, 50001) and "_schemas" in body["message"]
        refusals = [line for line in log_path.read_text().splitlines() if "refuses access" in line]
        assert len(refusals) == 1 and "Authorization failed" in refusals[0], log_path.read_text()

        _grant(admin, (ResourceType.TOPIC, "_schemas", AclOperation.READ),
               (ResourceType.TOPIC, "_schemas", AclOperation.WRITE))
        wait_for(lambda: _http(f"{url}/subjects") == (200, []), 90, what="the registry to read _schemas")
        status, body = _http(f"{url}/subjects/s/versions", "POST", {"schema": '"string"'})
        assert (status, body["error_code"]) == (500, 50004), body
        assert "cannot join the election group" in log_path.read_text()

        _grant(admin, (ResourceType.GROUP, GROUP, AclOperation.READ))
        wait_for(lambda: _http(f"{url}/subjects/s/versions", "POST", {"schema": '"string"'}) == (200, {"id": 1}),
                 90, what="a registration once the group is allowed")
        assert _http(f"{url}/subjects") == (200, ["s"])
        assert "Traceback" not in log_path.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
