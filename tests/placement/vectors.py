"""Load Kafka's recorded cases (``kafka-vectors.json``) and turn assignor inputs into library calls."""

from __future__ import annotations

import gzip
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from odradek.placement import (
    ASSIGNORS,
    PartitionInfo,
    StickyAssignor,
    Subscription,
    TopicPartition,
    encode_cooperative_user_data,
    encode_sticky_user_data,
)

# The recorded cases live in the shared folder beside the repository's checkout (<repo>/../shared/reference/), found
# from this file so every checkout and worktree reads it without a machine-specific path. A gzipped copy ships with
# the tests so they run on a machine without the shared folder; ODRADEK_KAFKA_VECTORS points elsewhere.
SHARED = Path(__file__).resolve().parents[3] / "shared" / "reference" / "kafka-vectors.json"
BUNDLED = Path(__file__).with_name("data") / "kafka-vectors.json.gz"


def source() -> Path:
    """The file the cases come from: the override, else the shared copy when present, else the bundled one."""
    override = os.environ.get("ODRADEK_KAFKA_VECTORS")
    if override:
        return Path(override)
    return SHARED if SHARED.exists() else BUNDLED


@cache
def all_cases() -> list[dict[str, Any]]:
    path = source()
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as f:
            return json.load(f)
    return json.loads(path.read_text())


def cases(prefix: str) -> list[dict[str, Any]]:
    return [c for c in all_cases() if c["algorithm"].startswith(prefix)]


def tp(text: str) -> TopicPartition:
    return TopicPartition.parse(text)


def build_call(case: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Subscription]]:
    """Assignor (with Kafka's instance state), partitions_per_topic and subscriptions of a call."""
    inp = case["input"]
    assignor = ASSIGNORS[inp["assignor"]](prefer_rack_aware_logic=inp["prefer_rack_aware_logic"])
    if "assignor_state_max_generation_before_call" in inp:
        assignor.max_generation = inp["assignor_state_max_generation_before_call"]
    ppt: dict[str, Any] = {}
    for t in inp["partitions_per_topic"]:
        if inp["api"] == "assign":
            ppt[t["topic"]] = t["num_partitions"]
        else:
            ppt[t["topic"]] = [PartitionInfo(t["topic"], i, tuple(r)) for i, r in enumerate(t["replica_racks"])]
    subs: dict[str, Subscription] = {}
    for s in inp["subscriptions"]:
        user_data = None
        md = s.get("member_data")
        if md is not None and isinstance(assignor, StickyAssignor):
            parts = [tp(p) for p in md["partitions"]]
            if parts or md["generation"] is not None:
                user_data = encode_sticky_user_data(parts, md["generation"])
        elif (
            md is not None
            and inp["assignor"] == "cooperative-sticky"
            and s["generation_id"] is None
            and md["generation"] is not None
        ):
            user_data = encode_cooperative_user_data(md["generation"])
        subs[s["member"]] = Subscription(
            topics=s["topics"],
            user_data=user_data,
            owned_partitions=[tp(p) for p in s["owned_partitions"]],
            generation_id=s["generation_id"],
            rack=s["rack"],
            group_instance_id=s["group_instance_id"],
        )
    return assignor, ppt, subs


def as_strings(assignment: dict[str, list[TopicPartition]]) -> dict[str, list[str]]:
    return {m: [str(p) for p in parts] for m, parts in assignment.items()}
