"""MkDocs hooks for odradek's documentation site (``make docs``): pages generated from what the repository
already holds, so nothing is written twice and nothing drifts.

- ``internals/architecture.md`` is ARCHITECTURE.md; ``benchmarks/results.md`` is bench/RESULTS.md with its plots.
- ``internals/state-machines.md`` draws the controller's, the group coordinator's and the transaction
  coordinator's state tables (the dictionaries the code checks every transition against) as Mermaid diagrams.
- A page that names an issue number fails the build: issue numbers mean nothing to a reader. The bench log's
  headings carry them, so the copy drops the parenthesised ones.
- Every file the nav names must exist, except those listed under ``extra.pages_to_come`` (pages being written
  elsewhere); those are left out of the nav until they arrive, with an INFO line.

Warnings go to the ``mkdocs`` logger, so ``mkdocs build --strict`` fails on them.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.odradek")
ROOT = Path(__file__).resolve().parent

ISSUE_NUMBER = re.compile(r"\bissues?[ -]#?\d+", re.IGNORECASE)
_BENCH_ISSUE_REFS = [
    (re.compile(r" \(issues? \d+(?:, \d+)*\)"), ""),  # "## Latency (issue 11)"
    (re.compile(r"\(issues? \d+(?:, \d+)*, "), "("),  # "(issue 15, 2026-11-24)"
    (re.compile(r", issues? \d+(?:, \d+)*\)"), ")"),  # "(2026-11-24, issue 11)"
    (re.compile(r"\bissue \d+'s "), "the "),  # "issue 15's open anomaly"
    (re.compile(r"\bthe\s+issue-\d+ table"), "the first table"),
]


def drop_issue_numbers(text: str) -> str:
    for pattern, replacement in _BENCH_ISSUE_REFS:
        text = pattern.sub(replacement, text)
    return text


def _label(state: enum.Enum) -> str:
    """Kafka's name of a state: the enum's value where it is Kafka's string, else its name in CamelCase."""
    if isinstance(state.value, str):
        return state.value
    return "".join(word.capitalize() for word in state.name.split("_"))


def mermaid(title: str, valid_previous: Mapping[Any, frozenset[Any]]) -> str:
    """A ``stateDiagram-v2`` with one arrow per allowed (previous, next) pair of a valid-previous-states table."""
    lines = [f"## {title}", "", "```mermaid", "stateDiagram-v2"]
    for target, sources in valid_previous.items():
        for source in sorted(sources, key=_label):
            lines.append(f"    {_label(source)} --> {_label(target)}")
    return "\n".join([*lines, "```", ""])


def state_machines_page() -> str:
    from odradek.broker.group.metadata import VALID_PREVIOUS_STATES
    from odradek.broker.txn.state import VALID_PREVIOUS
    from odradek.controller.states import PARTITION_VALID_PREVIOUS, REPLICA_VALID_PREVIOUS

    parts = [
        "# State machines",
        "",
        "Drawn at build time from the tables the code checks every transition against, so they cannot drift: the",
        "controller's partition and replica state machines (`controller/states.py`), the classic consumer group's",
        "states (`broker/group/metadata.py`) and a transactional id's states (`broker/txn/state.py`). An arrow is",
        "a transition the table allows; anything else is refused and logged.",
        "",
        mermaid("Partition state machine (controller)", PARTITION_VALID_PREVIOUS),
        mermaid("Replica state machine (controller)", REPLICA_VALID_PREVIOUS),
        mermaid("Consumer group (group coordinator)", VALID_PREVIOUS_STATES),
        mermaid("Transactional id (transaction coordinator)", VALID_PREVIOUS),
    ]
    return "\n".join(parts)


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "internals/architecture.md",
                                content=(ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")))
    files.append(File.generated(config, "internals/state-machines.md", content=state_machines_page()))
    results = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "benchmarks/results.md", content=drop_issue_numbers(results)))
    for plot in sorted((ROOT / "bench" / "plots").glob("*.png")):
        files.append(File.generated(config, f"benchmarks/plots/{plot.name}", abs_src_path=str(plot)))
    return files


def on_config(config: Any) -> Any:
    """Drop nav entries for pages still to come (``extra.pages_to_come``) while their file is absent."""
    docs = Path(config["docs_dir"])
    pending = set(config["extra"].get("pages_to_come", []))
    config["nav"] = _prune(config["nav"], docs, pending)
    return config


def _prune(items: list[Any], docs: Path, pending: set[str]) -> list[Any]:
    kept: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            [(title, value)] = item.items()
            if isinstance(value, list):
                kept.append({title: _prune(value, docs, pending)})
            elif value in pending and not (docs / value).exists():
                log.info("nav: %s (%s) is still to come; left out", title, value)
            else:
                kept.append(item)
        else:
            kept.append(item)
    return kept


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    found = ISSUE_NUMBER.search(markdown)
    if found:
        log.warning("%s names an issue number (%r); say what it is instead", page.file.src_uri, found.group(0))
    return markdown
