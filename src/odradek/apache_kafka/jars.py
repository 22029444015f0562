"""Apache Kafka's runtime jars, by artifact name from Maven Central, into a git-ignored cache reused between runs.

Kafka publishes no distribution tarball to Maven Central, only jars. A throwaway ``pom.xml`` naming the broker
(``kafka_2.13``), the tools, the Java clients and a logging backend is generated beside the cache, and
``mvn dependency:copy-dependencies`` copies every runtime jar into one ``lib/`` directory, the classpath of
:func:`odradek.apache_kafka.java.java_command`. Maven's own ``~/.m2`` keeps the downloads, so a second cache (another
worktree) fills from disk.

The cache root is ``$ODRADEK_JAR_CACHE`` when set, else ``.cache/jars`` in the source checkout (the directory
holding ``pyproject.toml`` above this package), else ``~/.cache/odradek/jars``; each version has
``<root>/<version>/lib``. A ``.complete`` marker is written last, so an interrupted fetch is redone, and a file lock
keeps concurrent test sessions from fetching the same version twice.

JVM applications beyond Kafka's own jars (Streams, Connect, Spark's connector) are *bundles*: a name and an artifact
list in :data:`BUNDLES`, cached the same way under ``<root>/<name>-<digest of the list>/lib``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["BUNDLES", "CONNECT", "STREAMS_VERSION", "artifacts", "cache_root", "connect_artifacts", "ensure",
           "ensure_bundle", "streams"]

Artifact = tuple[str, str, str]
"""(group, artifact, version), as a Maven dependency names it."""

_LOG4J2 = "2.25.5"
"""The log4j 2 that kafka_2.13 4.4.0 itself depends on (log4j-core, log4j-api), so the bridge matches it."""


def artifacts(version: str) -> list[Artifact]:
    """(group, artifact, version) of every jar asked for; Maven adds their runtime dependencies.

    Kafka's jars depend on slf4j-api 1.7.36 in 3.x and 4.x alike, so the logging backend is an slf4j 1.x binding:
    reload4j for 3.x (the slf4j-reload4j 1.7.36 and reload4j 1.2.25 Kafka 3.9 ships), log4j 2 with its slf4j 1.x
    bridge (``log4j-slf4j-impl``) for 4.x. The slf4j 2 bridge (``log4j-slf4j2-impl``) is not found by slf4j-api
    1.7, which would then log nothing.
    """
    kafka = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-tools", version),
        ("org.apache.kafka", "kafka-clients", version),
    ]
    if version.startswith("3."):
        return [*kafka, ("org.slf4j", "slf4j-reload4j", "1.7.36"), ("ch.qos.reload4j", "reload4j", "1.2.25")]
    return [
        *kafka,
        ("org.apache.logging.log4j", "log4j-core", _LOG4J2),
        ("org.apache.logging.log4j", "log4j-slf4j-impl", _LOG4J2),
    ]


def cache_root() -> Path:
    if env := os.environ.get("ODRADEK_JAR_CACHE"):
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").exists():
            return parent / ".cache" / "jars"
    return Path.home() / ".cache" / "odradek" / "jars"


def _pom(name: str, wanted: Sequence[Artifact]) -> str:
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>\n"
        for g, a, v in wanted
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>\n'
        f"<groupId>odradek.cache</groupId><artifactId>jars-{name}</artifactId><version>1</version>\n"
        f"<dependencies>\n{deps}</dependencies></project>\n"
    )


def ensure(version: str, *, timeout_s: float = 900.0) -> Path:
    """The ``lib/`` directory holding every runtime jar of Kafka ``version``, fetched with Maven on first use."""
    return _fill(cache_root() / version, version, artifacts(version), timeout_s)


STREAMS_VERSION = "4.4.0"
"""The Kafka Streams release the tests' Streams application runs on (the 4.x that odradek is compared with)."""


def streams() -> list[Artifact]:
    """Kafka Streams, with Kafka's tools for ``kafka-streams-application-reset`` (``StreamsResetter``) beside it, and
    the same log4j 2 backend as Kafka 4.x's own jars (see :func:`artifacts` for why the slf4j 1.x bridge)."""
    return [
        ("org.apache.kafka", "kafka-streams", STREAMS_VERSION),
        ("org.apache.kafka", "kafka-tools", STREAMS_VERSION),
        ("org.apache.logging.log4j", "log4j-core", _LOG4J2),
        ("org.apache.logging.log4j", "log4j-slf4j-impl", _LOG4J2),
    ]


CONNECT = "4.3.1"
"""The newest Kafka Connect whose three artifacts all resolve from Maven Central: connect-runtime 4.4.0 does, but
connect-file and connect-mirror 4.4.0 do not."""


def connect_artifacts(version: str = CONNECT) -> list[Artifact]:
    """Kafka Connect's distributed worker (``connect-runtime``), the FileStream connectors (``connect-file``) and
    MirrorMaker 2 (``connect-mirror``), with the same log4j 2 backend and slf4j 1.x bridge as :func:`artifacts`
    gives a 4.x broker (Connect logs through slf4j-api 1.7 as the broker does)."""
    return [
        ("org.apache.kafka", "connect-runtime", version),
        ("org.apache.kafka", "connect-file", version),
        ("org.apache.kafka", "connect-mirror", version),
        ("org.apache.logging.log4j", "log4j-core", _LOG4J2),
        ("org.apache.logging.log4j", "log4j-slf4j-impl", _LOG4J2),
    ]


BUNDLES: dict[str, Callable[[], list[Artifact]]] = {"kafka-streams": streams, "connect": connect_artifacts}
"""Named sets of jars beyond a Kafka version's own (a JVM application and its dependencies), each fetched by
``make jars`` as well as on first use."""


def ensure_bundle(name: str, wanted: Sequence[Artifact], *, timeout_s: float = 900.0) -> Path:
    """The ``lib/`` directory holding ``wanted`` and their runtime dependencies, under ``<root>/<name>-<digest>``:
    the digest names the artifact list, so changing the list fetches afresh instead of reusing a stale ``lib/``."""
    digest = hashlib.sha256(repr(sorted(wanted)).encode()).hexdigest()[:10]
    return _fill(cache_root() / f"{name}-{digest}", name, wanted, timeout_s)


def _fill(home: Path, name: str, wanted: Sequence[Artifact], timeout_s: float) -> Path:
    lib = home / "lib"
    done = home / ".complete"
    if done.exists():
        return lib
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("need Maven (`mvn`, Debian package maven) to fetch Apache Kafka's jars; see `make sysdeps`")
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():  # another session fetched it while this one waited
            return lib
        pom = home / "pom.xml"
        pom.write_text(_pom(name, wanted))
        staging = home / "lib.partial"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(lib, ignore_errors=True)
        result = subprocess.run(
            [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
             f"-DoutputDirectory={staging}"],
            capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"mvn could not fetch {name} (exit {result.returncode}):\n"
                f"{result.stdout[-4000:]}{result.stderr[-4000:]}"
            )
        staging.rename(lib)
        done.write_text(name + "\n")
    return lib
