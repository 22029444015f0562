"""Java processes on Kafka's jars: a tool run as its ``bin/kafka-*.sh`` script runs it, and small Java test programs
compiled at test time with ``javac`` (nothing compiled is committed).

Kafka's scripts run ``java <heap> <GC> -Dlog4j.configuration=<tools-log4j.properties> -cp <libs/*> <main class>``;
:func:`java_command` does the same with a small heap and the serial GC (the machines have two cores), and the tools'
log configuration as Kafka ships it: WARN and above to stderr, ``[%d] %p %m (%c)%n``. 3.x logs through reload4j
(log4j 1 properties), 4.x through log4j 2 (its properties format here, the same levels and pattern).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from odradek.apache_kafka import jars

__all__ = ["compile_java", "java_command", "log_config", "run_java", "run_tool"]

_PATTERN = "[%d] %p %m (%c)%n"


def _log4j1(root: str, target: str, levels: Mapping[str, str]) -> str:
    lines = [
        f"log4j.rootLogger={root}, out",
        "log4j.appender.out=org.apache.log4j.ConsoleAppender",
        f"log4j.appender.out.Target={'System.err' if target == 'stderr' else 'System.out'}",
        "log4j.appender.out.layout=org.apache.log4j.PatternLayout",
        f"log4j.appender.out.layout.ConversionPattern={_PATTERN}",
        *(f"log4j.logger.{name}={level}" for name, level in levels.items()),
    ]
    return "\n".join(lines) + "\n"


def _log4j2(root: str, target: str, levels: Mapping[str, str]) -> str:
    lines = [
        "status = warn",
        "appender.out.type = Console",
        "appender.out.name = OUT",
        f"appender.out.target = {'SYSTEM_ERR' if target == 'stderr' else 'SYSTEM_OUT'}",
        "appender.out.layout.type = PatternLayout",
        f"appender.out.layout.pattern = {_PATTERN}",
        f"rootLogger.level = {root.lower()}",
        "rootLogger.appenderRef.out.ref = OUT",
    ]
    for i, (name, level) in enumerate(levels.items()):
        lines += [f"logger.l{i}.name = {name}", f"logger.l{i}.level = {level.lower()}"]
    return "\n".join(lines) + "\n"


def log_config(version: str, kind: str) -> list[str]:
    """The JVM options naming a log configuration written beside the version's jars: ``kind`` is ``tools`` (WARN to
    stderr, as Kafka's ``config/tools-log4j.properties``) or ``server`` (INFO to stdout, the broker's readiness line
    among it; quieter for the request and state-change loggers, which Kafka sends to files of their own)."""
    if kind == "tools":
        root, target, levels = "WARN", "stderr", {"org.reflections": "ERROR"}
    elif kind == "server":
        root, target = "INFO", "stdout"
        levels = {"kafka.request.logger": "WARN", "state.change.logger": "WARN", "org.apache.zookeeper": "WARN",
                  "kafka.authorizer.logger": "WARN"}
    else:
        raise ValueError(f"unknown log configuration kind {kind!r}")
    home = jars.ensure(version).parent
    if version.startswith("3."):
        path, option = home / f"{kind}-log4j.properties", "-Dlog4j.configuration=file:"
        text = _log4j1(root, target, levels)
    else:
        path, option = home / f"{kind}-log4j2.properties", "-Dlog4j2.configurationFile="
        text = _log4j2(root, target, levels)
    if not path.exists() or path.read_text() != text:  # written whole, then renamed: a JVM never reads half of it
        partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
        partial.write_text(text)
        os.replace(partial, path)
    return [f"{option}{path}"]


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("need a JDK (`java`, Debian package default-jdk-headless); see `make sysdeps`")
    return java


def java_command(
    version: str,
    main_class: str,
    *args: str,
    heap_mb: int = 256,
    quick_start: bool = True,
    log: str = "tools",
    classpath: Sequence[Path] = (),
    jvm_options: Sequence[str] = (),
    lib: Path | None = None,
) -> list[str]:
    """``java ... -cp <extra>:<lib>/* main_class args`` for Kafka ``version`` (its jars fetched on first use).

    ``quick_start`` limits the JIT to C1: a JVM that lives a few seconds (a tool) starts faster, a long-lived one
    (a broker under a benchmark) runs slower, so benches pass ``quick_start=False``. ``lib`` is a bundle's jars
    (:func:`~odradek.apache_kafka.jars.ensure_bundle`) in place of the version's own; the log configuration is
    still the version's.
    """
    lib = lib if lib is not None else jars.ensure(version)
    cp = ":".join([*(str(p) for p in classpath), f"{lib}/*"])
    options = [f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-Djava.awt.headless=true", *log_config(version, log)]
    if quick_start:
        options.append("-XX:TieredStopAtLevel=1")
    return [_java(), *options, *jvm_options, "-cp", cp, main_class, *args]


def run_tool(
    version: str,
    main_class: str,
    *args: str,
    timeout: float = 120.0,
    input: str | None = None,
    check: bool = False,
) -> subprocess.CompletedProcess[str]:
    """One of Kafka's command-line tools, as its ``bin/`` script runs it; stdout and stderr captured as text."""
    return _run(java_command(version, main_class, *args), timeout, input, check)


def _run(command: list[str], timeout: float, input: str | None, check: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, input=input,
        stdin=None if input is not None else subprocess.DEVNULL, check=check,
    )


def compile_java(version: str, *sources: Path, out_dir: Path, lib: Path | None = None) -> Path:
    """``javac`` the ``sources`` against Kafka ``version``'s jars (or a bundle's ``lib``) into ``out_dir`` (returned,
    for :func:`run_java`)."""
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError("need a JDK with `javac` (Debian package default-jdk-headless); see `make sysdeps`")
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = lib or jars.ensure(version)
    result = subprocess.run(
        [javac, "-nowarn", "-cp", f"{lib}/*", "-d", str(out_dir), *map(str, sources)],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0:
        raise RuntimeError(f"javac failed (exit {result.returncode}):\n{result.stdout}{result.stderr}")
    return out_dir


def run_java(
    version: str,
    classes_dir: Path,
    main_class: str,
    *args: str,
    timeout: float = 120.0,
    input: str | None = None,
    check: bool = False,
    lib: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """A program compiled by :func:`compile_java`, with Kafka ``version``'s jars (or a bundle's ``lib``) behind it
    on the classpath."""
    command = java_command(version, main_class, *args, classpath=[classes_dir], lib=lib)
    return _run(command, timeout, input, check)
