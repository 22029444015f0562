"""The comparison every differential test module makes, in one place: both answers normalised and compared field by
field, and what differs checked against ``differences.py`` (unlisted differences fail, and so do listed ones that no
longer occur)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any

from differences import DIFFERENCES, Difference
from differential_corpus import Closed, Scenario
from differential_normalise import Diff, SelfIds, compare, glob, normalise
from differential_runner import Target, run_scenario

__all__ = ["Identified", "check", "load_scenarios", "run_both"]

Identified = tuple[Target, SelfIds]
"""A broker (or cluster) to send scenarios to, with what identifies it as itself for the normaliser."""

HERE = Path(__file__).parent


def load_scenarios(prefix: str) -> list[Scenario]:
    """The ``SCENARIOS`` of every module here whose name starts with ``prefix``, in module-name order."""
    found: list[Scenario] = []
    for info in sorted(pkgutil.iter_modules([str(HERE)]), key=lambda i: i.name):
        if info.name.startswith(prefix):
            found += importlib.import_module(info.name).SCENARIOS
    return found


def _listed(scenario: str) -> list[Difference]:
    return [d for d in DIFFERENCES if glob(d.scenario).match(scenario)]


def _unexplained(diffs: list[Diff], listed: list[Difference]) -> list[Diff]:
    return [d for d in diffs if not any(glob(entry.path).match(d.path) for entry in listed)]


def check(scenario: str, expected: Any, kafka_ids: SelfIds, got: Any, odradek_ids: SelfIds) -> None:
    """Fails on a difference ``differences.py`` does not list for ``scenario``, or on a listing that is stale."""
    if isinstance(expected, Closed) or isinstance(got, Closed):
        diffs = [] if type(expected) is type(got) else [Diff("<connection>", type(expected).__name__,
                                                             type(got).__name__)]
    else:
        diffs = compare(normalise(expected, kafka_ids), normalise(got, odradek_ids))
    listed = _listed(scenario)
    unexplained = _unexplained(diffs, listed)
    assert not unexplained, "differences not listed in differences.py:\n" + "\n".join(map(str, unexplained))
    stale = [e for e in listed if "*" not in e.scenario and e.always
             and not any(glob(e.path).match(d.path) for d in diffs)]
    assert not stale, f"listed differences that no longer occur (delete them): {stale}"


def run_both(scenario: Scenario, kafka: Identified, odradek: Identified) -> None:
    """The scenario run on Kafka, then on odradek, and the answers checked (:func:`check`)."""
    (kafka_target, kafka_ids), (odradek_target, odradek_ids) = kafka, odradek
    check(scenario.name, run_scenario(kafka_target, scenario), kafka_ids, run_scenario(odradek_target, scenario),
          odradek_ids)
