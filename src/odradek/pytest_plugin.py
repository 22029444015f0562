"""The pytest plugin installed with odradek (entry point ``pytest11``): a real Kafka-compatible cluster per test.

Two fixtures, both :class:`odradek.testing.ThreadedCluster` objects (``bootstrap_servers``, ``metrics``,
``listeners``, ``endpoints`` (the ready file's lines as a dict), ``kill(id)``,
``restart(id)``, ``stop(id)``, ``pause(id)``, ``resume(id)``, ``isolate(id)``, ``heal(id)``, ``controller_id()``,
and ``schema_registry_url``: a schema registry on the cluster, started the first time a test reads it):

- ``odradek_cluster``: a fresh cluster for each test (function scope), shaped by the test's
  ``@pytest.mark.odradek(brokers=N, racks=[...], overrides={...}, metrics=True)`` marker (three brokers without
  one). A test that kills brokers gets a clean cluster and cannot disturb the next one.
- ``odradek_cluster_session``: one cluster for the whole run, shaped by the ini options ``odradek_brokers``,
  ``odradek_racks`` and ``odradek_overrides``; cheaper when many tests only produce and consume. A test using it
  must not carry the marker (the cluster is already made), and faults it injects are seen by later tests.

Everything runs in the test process on a background event loop: no JVM, no Docker, no ports fixed. The brokers'
import is deferred to the first fixture use, so merely installing odradek costs other test suites nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from odradek.testing import ThreadedCluster

MARKER = "odradek"
DEFAULT_BROKERS = 3


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("odradek_brokers", "brokers of the odradek_cluster_session cluster", default=str(DEFAULT_BROKERS))
    parser.addini("odradek_racks", "comma-separated racks of the odradek_cluster_session cluster", default="")
    parser.addini("odradek_overrides", "broker configs (name=value) of the odradek_cluster_session cluster",
                  type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(brokers=3, racks=None, overrides=None, metrics=False): shape of the odradek_cluster fixture's "
        "cluster (racks: one per broker or one for all; overrides: Kafka broker configs by name; metrics: serve "
        "/metrics on free ports)",
    )


def _racks(value: str | Sequence[str] | None) -> list[str] | None:
    if not value:
        return None
    if isinstance(value, str):
        return [r.strip() for r in value.split(",") if r.strip()]
    return [str(r) for r in value]


def _start(tmp: Any, brokers: int, racks: list[str] | None, overrides: Mapping[str, Any],
           metrics: bool = False) -> ThreadedCluster:
    from odradek.testing import start_cluster

    return start_cluster(tmp, brokers, racks=racks, overrides={k: str(v) for k, v in overrides.items()},
                         metrics=metrics)


@pytest.fixture
def odradek_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A fresh odradek cluster for this test, shaped by ``@pytest.mark.odradek(...)``."""
    marker = request.node.get_closest_marker(MARKER)
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    unknown = set(kwargs) - {"brokers", "racks", "overrides", "metrics"}
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.odradek takes brokers, racks, overrides, metrics; not {sorted(unknown)}")
    cluster = _start(
        tmp_path_factory.mktemp("odradek"), int(kwargs.get("brokers", DEFAULT_BROKERS)),
        _racks(kwargs.get("racks")), dict(kwargs.get("overrides") or {}), bool(kwargs.get("metrics", False)),
    )
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="session")
def _odradek_session_cluster(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    overrides: dict[str, str] = {}
    for line in pytestconfig.getini("odradek_overrides"):
        name, sep, value = str(line).partition("=")
        if not sep:
            raise pytest.UsageError(f"odradek_overrides: expected name=value, got {line!r}")
        overrides[name.strip()] = value.strip()
    cluster = _start(
        tmp_path_factory.mktemp("odradek-session"), int(pytestconfig.getini("odradek_brokers")),
        _racks(str(pytestconfig.getini("odradek_racks"))), overrides,
    )
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def odradek_cluster_session(request: pytest.FixtureRequest, _odradek_session_cluster: Any) -> Any:
    """The run's shared odradek cluster, shaped by the ``odradek_*`` ini options."""
    if request.node.get_closest_marker(MARKER) is not None:
        raise pytest.UsageError(
            "@pytest.mark.odradek shapes odradek_cluster only; odradek_cluster_session is shaped by the "
            "odradek_brokers, odradek_racks and odradek_overrides ini options"
        )
    return _odradek_session_cluster
