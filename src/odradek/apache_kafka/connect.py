"""Kafka Connect and MirrorMaker 2 from the ``connect`` jar bundle, run as Kafka's scripts run them.

``bin/connect-distributed.sh`` runs ``org.apache.kafka.connect.cli.ConnectDistributed <worker.properties>``;
``bin/connect-mirror-maker.sh`` runs ``org.apache.kafka.connect.mirror.MirrorMaker <mm2.properties>`` (dedicated
mode: one JVM running every enabled ``source->target`` flow). Both get the bundle's jars
(:func:`~odradek.apache_kafka.jars.connect_artifacts`) and the server log configuration (INFO to the process's log
file). Plugins are found through their ServiceLoader manifests (``plugin.discovery=service_load``, which every
plugin of the bundle has): the default also scans the classpath by reflection, some ten seconds per herder on these
machines, three times in a two-way MirrorMaker (whose per-flow herders take it from the target cluster's
``<alias>.`` settings). A worker's REST listener is on 127.0.0.1 at a port the OS handed out, kept across restarts;
the worker is ready when ``GET /connectors`` answers 200, which it does only once it has joined its group and read
the config topic.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from odradek.apache_kafka import KAFKA_4, jars, jvm
from odradek.apache_kafka.cluster import free_port, kill_process, stop_process

__all__ = ["ConnectWorker", "JavaProcess", "MirrorMaker"]

_LOG_VERSION = KAFKA_4
"""The Kafka version whose log configuration (log4j 2 properties, as the bundle's log4j 2 reads) its JVMs get."""


def _properties(values: Mapping[str, object]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


class JavaProcess:
    """One JVM of the bundle running ``main_class <properties file>``, its output appended to ``<home>/<name>.log``;
    :meth:`start` again after :meth:`kill` reuses the properties and the log."""

    def __init__(self, home: Path, name: str, main_class: str, properties: Mapping[str, object],
                 *, heap_mb: int = 384) -> None:
        self.home = home
        self.main_class = main_class
        self.heap_mb = heap_mb
        self.config_path = home / f"{name}.properties"
        self.log_path = home / f"{name}.log"
        self.properties = dict(properties)
        self.proc: subprocess.Popen[bytes] | None = None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        if self.running():
            return
        self.home.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(_properties({"plugin.discovery": "service_load", **self.properties}))
        command = jvm.java_command(
            _LOG_VERSION, self.main_class, str(self.config_path), heap_mb=self.heap_mb, log="server",
            lib=jars.ensure_bundle("connect", jars.connect_artifacts()),
        )
        with open(self.log_path, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL (``kill -9``): no offsets flushed, no group left; the next start resumes from what was committed."""
        kill_process(self.proc)
        self.proc = None

    def stop(self, grace_s: float = 60.0) -> None:
        """SIGTERM (Connect's shutdown hook stops tasks and commits offsets), then SIGKILL past ``grace_s``."""
        stop_process(self.proc, grace_s)
        self.proc = None

    def _check_alive(self, what: str) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"{what} exited:\n{self.tail()}")


class ConnectWorker(JavaProcess):
    """A distributed worker: ``worker`` properties (``bootstrap.servers``, ``group.id``, the storage topics...) with
    ``listeners`` set to its REST port."""

    def __init__(self, home: Path, worker: Mapping[str, object], *, heap_mb: int = 384) -> None:
        self.rest_port = free_port()
        properties = {**worker, "listeners": f"http://127.0.0.1:{self.rest_port}",
                      "rest.advertised.host.name": "127.0.0.1", "rest.advertised.port": self.rest_port}
        super().__init__(home, "worker", "org.apache.kafka.connect.cli.ConnectDistributed", properties,
                         heap_mb=heap_mb)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def start(self, deadline_s: float = 180.0) -> ConnectWorker:
        self.spawn()
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            self._check_alive("Connect worker")
            status, _ = self.rest("GET", "/connectors")
            if status == 200:
                return self
            time.sleep(0.5)
        raise RuntimeError(f"Connect worker not ready after {deadline_s:.0f}s:\n{self.tail()}")

    def rest(self, method: str, path: str, body: object = None, timeout: float = 30.0) -> tuple[int, Any]:
        """One REST call: (HTTP status, decoded JSON body or None); 0 when nothing answers yet."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                return error.code, json.loads(raw) if raw else None
            except ValueError:
                return error.code, raw.decode(errors="replace")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, None

    def put_connector(self, name: str, config: Mapping[str, str]) -> None:
        """``PUT /connectors/<name>/config``: create or update; retried while the worker answers that a rebalance is
        under way (409) or that it is not yet a member (503), as Connect asks clients to."""
        deadline = time.monotonic() + 60.0
        while True:
            status, answer = self.rest("PUT", f"/connectors/{name}/config", dict(config))
            if status in (200, 201):
                return
            if status not in (0, 409, 503) or time.monotonic() > deadline:
                raise RuntimeError(f"PUT connector {name}: {status} {answer}")
            time.sleep(0.5)

    def states(self, name: str) -> tuple[str, list[str]]:
        """The connector's state and its tasks' states from ``GET /connectors/<name>/status`` ("" when unknown)."""
        status, answer = self.rest("GET", f"/connectors/{name}/status")
        if status != 200 or not isinstance(answer, dict):
            return "", []
        return answer["connector"]["state"], [task["state"] for task in answer.get("tasks", [])]


class MirrorMaker(JavaProcess):
    """MirrorMaker 2 in dedicated mode, on ``properties`` (``clusters``, ``<alias>.bootstrap.servers``,
    ``<source>-><target>.enabled``...). It has no readiness signal of its own: callers wait on what it writes."""

    def __init__(self, home: Path, properties: Mapping[str, object], *, heap_mb: int = 384) -> None:
        aliases = [alias.strip() for alias in str(properties.get("clusters", "")).split(",") if alias.strip()]
        per_cluster = {f"{alias}.plugin.discovery": "service_load" for alias in aliases}
        super().__init__(home, "mm2", "org.apache.kafka.connect.mirror.MirrorMaker", {**per_cluster, **properties},
                         heap_mb=heap_mb)

    def start(self) -> MirrorMaker:
        self.spawn()
        return self

    def check_alive(self) -> None:
        self._check_alive("MirrorMaker 2")
