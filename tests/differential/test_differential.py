"""The differential corpus: every scenario sent to Apache Kafka 3.9 and to odradek, the answers compared field by
field after normalising; any difference not listed in ``differences.py`` fails, as does a stale listing or a stale
``docs/differences.md``."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest
from differences import DIFFERENCES, Difference, render
from differential_corpus import Closed, Scenario
from differential_normalise import Diff, SelfIds, compare, glob, normalise
from differential_runner import Target, run_scenario

from odradek.broker.api_registry import load_apis

HERE = Path(__file__).parent
DOCUMENT = HERE.parent.parent / "docs" / "differences.md"


def _scenarios() -> list[Scenario]:
    found: list[Scenario] = []
    for info in sorted(pkgutil.iter_modules([str(HERE)]), key=lambda i: i.name):
        if info.name.startswith("scenarios_"):
            found += importlib.import_module(info.name).SCENARIOS
    return found


SCENARIOS = _scenarios()


def _listed(scenario: str) -> list[Difference]:
    return [d for d in DIFFERENCES if glob(d.scenario).match(scenario)]


def _unexplained(diffs: list[Diff], listed: list[Difference]) -> list[Diff]:
    return [d for d in diffs if not any(glob(entry.path).match(d.path) for entry in listed)]


_KAFKA_FIXTURES = {"3.9": "kafka_target", "4": "kafka4_target"}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(scenario: Scenario, request: pytest.FixtureRequest,
                  odradek_target: tuple[Target, SelfIds]) -> None:
    # the 4.x broker starts only when a scenario needs it
    kafka, kafka_ids = request.getfixturevalue(_KAFKA_FIXTURES[scenario.against])
    odradek, odradek_ids = odradek_target
    expected = run_scenario(kafka, scenario)
    got = run_scenario(odradek, scenario)
    if isinstance(expected, Closed) or isinstance(got, Closed):
        diffs = [] if type(expected) is type(got) else [Diff("<connection>", type(expected).__name__,
                                                             type(got).__name__)]
    else:
        diffs = compare(normalise(expected, kafka_ids), normalise(got, odradek_ids))
    listed = _listed(scenario.name)
    unexplained = _unexplained(diffs, listed)
    assert not unexplained, "differences not listed in differences.py:\n" + "\n".join(map(str, unexplained))
    stale = [e for e in listed if "*" not in e.scenario and e.always
             and not any(glob(e.path).match(d.path) for d in diffs)]
    assert not stale, f"listed differences that no longer occur (delete them): {stale}"


def test_scenario_names_are_unique() -> None:
    names = [s.name for s in SCENARIOS]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_every_served_api_is_in_the_corpus() -> None:
    sent = {s.request.api_key for s in SCENARIOS}
    missing = sorted(set(load_apis()) - sent)
    assert not missing, f"API keys odradek serves that no scenario sends: {missing}"


def test_every_listed_difference_names_a_scenario() -> None:
    names = [s.name for s in SCENARIOS]
    orphans = [d for d in DIFFERENCES if not any(glob(d.scenario).match(n) for n in names)]
    assert not orphans, f"differences.py entries matching no scenario: {orphans}"


def test_differences_document_is_current() -> None:
    """The document is rewritten from the list on every run; a committed copy that differed fails once."""
    text = render()
    current = DOCUMENT.read_text() if DOCUMENT.exists() else ""
    if current != text:
        DOCUMENT.write_text(text)
    assert current == text, f"{DOCUMENT} was stale and has been regenerated: commit it"
