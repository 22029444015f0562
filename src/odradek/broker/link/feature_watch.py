"""The cluster's finalized features as this broker knows them, from ``/feature`` (Kafka's
FinalizedFeatureChangeListener and the ZooKeeper-mode feature cache).

The node is read with a watch at every registration and again each time the watch fires (it is armed anew on
every read, so no change is missed); the node's data version is the epoch ApiVersions reports. Until the node
exists (a cluster whose controller has not been elected yet) or while it is Disabled, there are no finalized
features and the epoch is -1, as Kafka's ``UNKNOWN_FINALIZED_FEATURES_EPOCH``. A node this broker cannot read is
logged once per change and leaves what it knew.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.broker.link.membership import Membership
from odradek.coordination import NoNodeError
from odradek.coordination import znodes as zn
from odradek.tasks import spawn

log = logging.getLogger(__name__)

UNKNOWN_EPOCH = -1


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    levels: Mapping[str, int] = field(default_factory=dict)
    epoch: int = UNKNOWN_EPOCH

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)


class FeatureWatch:
    def __init__(self, membership: Membership) -> None:
        self.membership = membership
        self.finalized = FinalizedFeatures()
        self.stopped = False
        membership.on_registered(self.watch)

    async def watch(self) -> None:
        session = self.membership.current()
        fired = self.membership.rearming(session, self.watch, "feature-watch", lambda: self.stopped)
        try:
            data, stat = await session.get(zn.FEATURE, watch=fired)
        except NoNodeError:
            if await session.exists(zn.FEATURE, watch=fired) is None:
                self.finalized = FinalizedFeatures()
                return
            spawn(self.watch(), "feature-watch")  # created between the two reads
            return
        node = zn.decode_or_skip(zn.FeatureZNode.from_json, data, zn.FEATURE)
        if node is None:
            return
        self.finalized = (FinalizedFeatures(dict(node.features), stat.version) if node.enabled
                          else FinalizedFeatures())
