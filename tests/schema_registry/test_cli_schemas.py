"""``odradek schemas`` against a registry: register, list, describe, check, delete, and errors as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from odradek.cli import main
from odradek.testing import ThreadedCluster

pytestmark = pytest.mark.odradek(brokers=1)


def test_schemas_command(odradek_cluster: ThreadedCluster, tmp_path: Path) -> None:
    url = odradek_cluster.schema_registry_url
    v1, v2, bad = tmp_path / "v1.avsc", tmp_path / "v2.avsc", tmp_path / "bad.avsc"
    v1.write_text(json.dumps({"type": "record", "name": "U", "fields": [{"name": "a", "type": "int"}]}))
    v2.write_text(json.dumps({"type": "record", "name": "U", "fields": [{"name": "a", "type": "int"},
                                                                        {"name": "b", "type": "int"}]}))
    bad.write_text('{"type": "recd"}')
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(main, ["schemas", "--schema-registry-url", url, *args])
        return result.exit_code, result.output

    assert run("--register", "--subject", "u", "--schema-file", str(v1)) == (0, "Registered schema id 1 under u.\n")
    assert run("--list") == (0, "u\n")
    code, out = run("--describe", "--subject", "u")
    assert code == 0 and out.startswith("subject u version 1 id 1 type AVRO\n")
    code, out = run("--check", "--subject", "u", "--schema-file", str(v2))
    assert code == 1 and "incompatible: {errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'" in out
    code, out = run("--register", "--subject", "u", "--schema-file", str(bad))
    assert code == 1 and "(error code 42201)" in out
    code, out = run("--describe", "--subject", "nobody")
    assert code == 1 and out.strip() == "Error: Subject 'nobody' not found. (error code 40401)"
    assert run("--delete", "--subject", "u") == (0, "Deleted u versions 1.\n")
    assert run("--list") == (0, "")
    assert run("--list", "--deleted") == (0, "u\n")
