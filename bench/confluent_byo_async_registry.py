"""A pytest plugin for confluent-kafka-python v2.15.0's ``tests/integration/schema_registry`` against a running
registry (``SR_URL``): the suite's ``ByoFixture`` (its fixture for a cluster it did not start) has no
``async_schema_registry``, which every ``_async`` test calls, so the async half cannot run against any registry of
one's own. This adds the method, building the client as the suite's ``TrivupFixture`` does. Loaded by
``bench/client_suites.py`` with ``-p``; nothing else changes in the suite.
"""

from __future__ import annotations

from typing import Any


def pytest_configure(config: Any) -> None:
    from confluent_kafka.schema_registry import AsyncSchemaRegistryClient
    from tests.integration.cluster_fixture import ByoFixture  # the suite's own module, on the suite's path

    if hasattr(ByoFixture, "async_schema_registry"):
        return

    def async_schema_registry(self: Any, conf: dict[str, Any] | None = None) -> Any:
        return AsyncSchemaRegistryClient({"url": self._sr_url, **(conf or {})})

    ByoFixture.async_schema_registry = async_schema_registry
