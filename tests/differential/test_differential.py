"""The differential corpus: every scenario sent to Apache Kafka 3.9 and to odradek, the answers compared field by
field after normalising; any difference not listed in ``differences.py`` fails, as does a stale listing or a stale
``docs/differences.md``."""

from __future__ import annotations

from pathlib import Path

import pytest
from differences import DIFFERENCES, render
from differential_check import load_scenarios, run_both
from differential_corpus import Scenario
from differential_normalise import SelfIds, glob
from differential_runner import Target

from odradek.broker.api_registry import load_apis

HERE = Path(__file__).parent
DOCUMENT = HERE.parent.parent / "docs" / "differences.md"


SCENARIOS = load_scenarios("scenarios_")
EVERY_SCENARIO = [*SCENARIOS, *load_scenarios("cluster_scenarios"), *load_scenarios("secured_scenarios")]
"""With the three-broker and the secured pair's scenarios (their own test modules run them), for the listing's
checks."""


_KAFKA_FIXTURES = {"3.9": "kafka_target", "4": "kafka4_target"}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(scenario: Scenario, request: pytest.FixtureRequest,
                  odradek_target: tuple[Target, SelfIds]) -> None:
    # the 4.x broker starts only when a scenario needs it
    run_both(scenario, request.getfixturevalue(_KAFKA_FIXTURES[scenario.against]), odradek_target)


def test_scenario_names_are_unique() -> None:
    names = [s.name for s in EVERY_SCENARIO]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_every_served_api_is_in_the_corpus() -> None:
    sent = {s.request.api_key for s in SCENARIOS}
    missing = sorted(set(load_apis()) - sent)
    assert not missing, f"API keys odradek serves that no scenario sends: {missing}"


def test_every_listed_difference_names_a_scenario() -> None:
    names = [s.name for s in EVERY_SCENARIO]
    orphans = [d for d in DIFFERENCES if not any(glob(d.scenario).match(n) for n in names)]
    assert not orphans, f"differences.py entries matching no scenario: {orphans}"


def test_differences_document_is_current() -> None:
    """The document is rewritten from the list on every run; a committed copy that differed fails once."""
    text = render()
    current = DOCUMENT.read_text() if DOCUMENT.exists() else ""
    if current != text:
        DOCUMENT.write_text(text)
    assert current == text, f"{DOCUMENT} was stale and has been regenerated: commit it"
