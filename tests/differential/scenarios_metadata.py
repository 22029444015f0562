"""Metadata (3): every version for a known topic, unknown and invalid names, several partitions."""

from __future__ import annotations

from differential_corpus import Call, Scenario, Topic


def _topics(version: int, *names: str) -> list[dict[str, str]]:
    return [{"name": n} for n in names]


def _metadata(version: int, *names: str, auto_create: bool = False) -> Call:
    body: dict[str, object] = {"topics": _topics(version, *names)}
    if version >= 4:
        body["allow_auto_topic_creation"] = auto_create
    return Call(3, version, body)


SCENARIOS = [
    *(Scenario(f"metadata.v{v}.known-topic", _metadata(v, "{topic}"), topics=(Topic(),)) for v in range(13)),
    *(Scenario(f"metadata.v{v}.three-partitions", _metadata(v, "{topic}"), topics=(Topic(3),))
      for v in (1, 9, 12)),
    *(Scenario(f"metadata.v{v}.unknown-topic", _metadata(v, "{topic}")) for v in range(4, 13)),
    *(Scenario(f"metadata.v{v}.invalid-name", _metadata(v, "bad name!")) for v in (1, 4, 9, 12)),
    *(Scenario(f"metadata.v{v}.no-topics", _metadata(v)) for v in (1, 9, 12)),
    Scenario("metadata.v12.known-and-unknown", _metadata(12, "{topic}", "{topic}-missing"), topics=(Topic(),)),
    Scenario("metadata.v8.authorized-operations",
             Call(3, 8, {"topics": [{"name": "{topic}"}], "allow_auto_topic_creation": False,
                         "include_topic_authorized_operations": True,
                         "include_cluster_authorized_operations": True}), topics=(Topic(),)),
]
