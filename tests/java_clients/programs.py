"""Running the Java check programs (``java/*.java``) and reading what they print.

Each program prints one JSON object per line, every one with a ``check`` key naming what it reports. The helpers
here run a program against a bootstrap address, fail the test with the program's stderr when it does not finish,
and put the lines into a shape the tests compare: against odradek, and the same program against Apache Kafka.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from odradek.apache_kafka import run_java

JAVA_DIR = Path(__file__).parent / "java"
PROGRAM_TIMEOUT_S = 300.0

Lines = list[dict[str, Any]]
"""The JSON lines one program printed, in order."""

Runner = Callable[..., Lines]
"""``run(program, *args)`` for one client version and one cluster: the program's lines."""


def sources() -> list[Path]:
    return sorted(JAVA_DIR.glob("*.java"))


def run_program(version: str, classes: Path, program: str, bootstrap: str, *args: str) -> Lines:
    """Run ``program`` with Kafka ``version``'s jars; its lines, or an AssertionError carrying its stderr."""
    result = run_java(version, classes, program, bootstrap, *args, timeout=PROGRAM_TIMEOUT_S)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0:
        raise AssertionError(
            f"{program} {' '.join(args)} exited {result.returncode} on client {version}; printed {lines}\n"
            f"{result.stderr[-6000:]}"
        )
    return lines


def by_check(lines: Lines, check: str) -> Lines:
    """The lines reporting ``check``."""
    return [line for line in lines if line["check"] == check]


def one(lines: Lines, check: str, **match: Any) -> dict[str, Any]:
    """The one line reporting ``check`` whose fields equal ``match``."""
    found = [line for line in by_check(lines, check) if all(line.get(k) == v for k, v in match.items())]
    assert len(found) == 1, f"expected one {check} {match}, got {found} in {lines}"
    return found[0]


def without_prefix(lines: Lines, prefix: str) -> Lines:
    """The lines with ``prefix`` (the run's topic names) taken out of every string, so two runs compare."""
    return json.loads(json.dumps(lines).replace(prefix, "P"))


def differences(ours: Lines, theirs: Lines) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]]:
    """The (odradek, Kafka) pairs of lines that differ, position by position; empty when the runs agree."""
    pairs = list(zip(ours, theirs, strict=False))
    pairs += [(line, None) for line in ours[len(theirs):]] + [(None, line) for line in theirs[len(ours):]]
    return [(a, b) for a, b in pairs if a != b]


CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def batch_codecs(segment: Path) -> list[str]:
    """The compression codec of every record batch in a log segment, from the attributes' low three bits.

    The v2 batch header (Kafka's DefaultRecordBatch): base offset (8 bytes), batch length (4), partition leader
    epoch (4), magic (1), CRC (4), attributes (2), ...; the batch length counts the bytes after its own field.
    """
    data = segment.read_bytes()
    codecs = []
    pos = 0
    while pos + 23 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        if length <= 0:
            break
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        codecs.append(CODEC_NAMES.get(attributes & 0x07, f"unknown-{attributes & 0x07}"))
        pos += 12 + length
    return codecs


def first_segment(data_root: Path, topic: str) -> Path:
    """The first log segment of ``topic``'s partition 0 somewhere under ``data_root``."""
    found = sorted(data_root.rglob(f"{topic}-0/00000000000000000000.log"))
    assert len(found) == 1, f"expected one first segment of {topic}-0 under {data_root}, found {found}"
    return found[0]
