"""The README is what a newcomer reads in five minutes; everything else lives in the documentation site (docs/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_stays_short_and_names_no_issue_numbers() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 200
    assert not re.search(r"\bissues?[ -]#?\d+", text, re.IGNORECASE)


def test_every_file_the_readme_links_to_exists() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text) if "://" not in t]
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []
