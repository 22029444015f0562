"""The checkout's example pipeline (``examples/clickstream.py`` into ``examples/page_views.py``), loaded as modules.

``odradek demo`` and the lab's Spark run both drive it; the examples are not part of the package, so they are read
from the repository the code runs from.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load() -> tuple[Any, Any]:
    """The ``clickstream`` and ``page_views`` modules; outside a checkout, an exit saying where they were looked for."""
    if not (EXAMPLES / "page_views.py").exists():
        raise SystemExit(f"odradek's examples run from a checkout: {EXAMPLES} not found")
    sys.path.insert(0, str(EXAMPLES))
    import clickstream  # type: ignore[import-not-found]
    import page_views  # type: ignore[import-not-found]

    return clickstream, page_views
