"""ApiVersions (18), every version: the API ranges are compared key by key."""

from __future__ import annotations

from differential_corpus import Call, Scenario

SCENARIOS = [
    *(Scenario(f"api-versions.v{v}", Call(18, v, {"client_software_name": "differential",
                                                   "client_software_version": "1.0"} if v >= 3 else {}))
      for v in range(5)),
]
