"""ARCHITECTURE.md's layer table is the import-linter contract in pyproject.toml, and the source keeps it.

import-linter (grimp underneath) builds the package's import graph, imports inside functions and behind
TYPE_CHECKING included, and checks every contract in ``[tool.importlinter]``: the layers (indirect imports too, so
a chain up the table breaks it as one import would), the broker's composition root, and the client side kept apart
from the server. The table is compared with the contract row by row, so neither changes without the other.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from importlinter import configuration
from importlinter.application import use_cases

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"


def _contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    return {contract["id"]: contract for contract in config["contracts"]}


def _table_rows() -> list[set[str]]:
    """The first column of ARCHITECTURE.md's layer table, each row as the module names it lists."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Layers and the direction of imports", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        if line.startswith("| `"):
            first = line.strip("|").split("|")[0]
            rows.append({re.sub(r"(/|\.py)$", "", name) for name in re.findall(r"`([^`]+)`", first)})
    return rows


def test_architecture_table_lists_the_contracts_layers() -> None:
    contract = _contracts()["layers"]
    layers = [{name.strip() for name in re.split(r"[|:]", layer)} for layer in contract["layers"]]
    assert _table_rows() == layers


def test_every_module_at_the_root_has_a_row() -> None:
    """The contract is exhaustive (import-linter then fails on a module it does not place); this says which."""
    listed = set().union(*_table_rows())
    package = ROOT / "src" / "odradek"
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert modules - listed == set()
    assert listed - modules == set()


def test_import_contracts_are_kept() -> None:
    """Through import-linter's use case rather than its command, whose logging set-up would disable every logger
    already made (and so the log assertions of the tests that run after this one)."""
    assert _contracts()["layers"]["exhaustive"] is True
    configuration.configure()
    kept = use_cases.lint_imports(config_filename=str(PYPROJECT), cache_dir=None, no_logo=True)
    assert kept, "import-linter: see the report above"
