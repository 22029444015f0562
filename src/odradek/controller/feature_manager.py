"""The controller's side of finalized features: ``/feature`` made Enabled on failover, and UpdateFeatures.

The decisions are :mod:`.features`' (pure); this manager reads ``/feature`` and the live brokers' registrations,
and writes the node at the data version it read behind the controller-epoch check, so a zombie controller's write
and one racing another writer both fail whole. Brokers learn the new levels from their watch on the node
(``broker/link/feature_watch.py``), as Kafka's FinalizedFeatureChangeListener does; the controller does not wait
for them (Kafka 3.9 waits for its own cache only).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from odradek.controller.features import FeatureUpdate, UpdateOutcome, decide_updates, enabled_node, registered_ranges
from odradek.controller.shared import Shared
from odradek.controller.zkstore import ControllerMovedError
from odradek.coordination.store import CoordinationError
from odradek.coordination.znodes import FeatureZNode
from odradek.errors import ErrorCode

log = logging.getLogger("odradek.controller")


class FeatureManager:
    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    async def enable(self) -> None:
        """Kafka's ``enableFeatureVersioning``, run first on failover."""
        store = self._shared.store
        found = await store.features()
        node = enabled_node(found[0] if found else None)
        if node is not None:
            log.info("controller %d: writing /feature with finalized features %s", self._shared.broker_id,
                     dict(node.features))
            await store.write_features(node, None if found is None else found[1])

    async def update(self, updates: Sequence[FeatureUpdate], validate_only: bool) -> UpdateOutcome:
        shared = self._shared
        found = await shared.store.features()
        finalized = dict(found[0].features) if found is not None and found[0].enabled else {}
        brokers = {broker_id: registered_ranges(registration.features)
                   for broker_id, registration in shared.ctx.live_brokers.items()}
        outcome = decide_updates(updates, finalized, shared.broker_id, brokers, validate_only)
        if outcome.target is None:
            return outcome
        try:
            await shared.store.write_features(FeatureZNode(outcome.target), None if found is None else found[1])
        except ControllerMovedError:
            raise
        except CoordinationError as exc:
            log.warning("controller %d: feature update %s failed: %s", shared.broker_id, outcome.target, exc)
            return UpdateOutcome(ErrorCode.feature_update_failed, f"Unable to write /feature: {exc}", None)
        log.info("controller %d: finalized features are now %s", shared.broker_id, outcome.target)
        return outcome
