"""The lab's tests need root and ``ip netns``; without them they are skipped with the reason (never silently)."""

from __future__ import annotations

import pytest

from odradek.lab.netns import netns_available


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = netns_available()
    if reason is None:
        return
    for item in items:
        if item.get_closest_marker("lab") is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
