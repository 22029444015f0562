"""The API registry: every module in :mod:`odradek.broker.apis` is one Kafka API, found at start-up.

What ApiVersions advertises is exactly this set, so an API is served (and advertised) by adding its module and by
nothing else: there is no hand-kept list to forget.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from odradek.broker import apis as apis_pkg


def load_apis() -> dict[int, ModuleType]:
    found: dict[int, ModuleType] = {}
    for info in pkgutil.iter_modules(apis_pkg.__path__):
        module = importlib.import_module(f"{apis_pkg.__name__}.{info.name}")
        key = getattr(module, "API_KEY", None)
        if key is None:
            continue
        if key in found:
            raise RuntimeError(f"API key {key} served by both {found[key].__name__} and {module.__name__}")
        found[key] = module
    return found
