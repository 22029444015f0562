"""A leader's ISR changes: written to the partition state znode by compare-and-set, announced in batches.

The leader alone changes a partition's ISR in ZooKeeper-era Kafka. Its write carries the znode version it last
saw; losing that race means the controller (or a newer leader) has moved on, and the change is dropped. Changes
are announced under ``/isr_change_notification`` in batches, with Kafka's constants: after 5 s without a new
change, or 60 s after the first, so a burst of shrinks costs the controller one event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.broker.link.membership import Membership
from odradek.broker.replica import Partition
from odradek.clock import Clock
from odradek.coordination import BadVersionError, NoNodeError
from odradek.coordination import znodes as zn

log = logging.getLogger(__name__)

ISR_QUIET_MS = 5_000
ISR_MAX_DELAY_MS = 60_000


class IsrPropagation:
    def __init__(self, membership: Membership, clock: Clock, controller_epoch: Callable[[], int]) -> None:
        self.membership = membership
        self.clock = clock
        self.controller_epoch = controller_epoch
        self.quiet_ms = ISR_QUIET_MS
        self.max_delay_ms = ISR_MAX_DELAY_MS
        self._changes: set[zn.TopicPartition] = set()
        self._first_ms = 0
        self._last_ms = 0

    async def write_isr(self, part: Partition, new_isr: list[int]) -> int | None:
        """Compare-and-set the partition state; on a lost race re-read, and accept only our own write."""
        session = self.membership.current()
        broker_id = self.membership.broker_id
        path = zn.partition_state_path(part.topic, part.index)
        state = zn.PartitionState(broker_id, part.leader_epoch, tuple(new_isr), self.controller_epoch())
        try:
            stat = await session.set(path, state.to_json(), expected_version=part.zk_version)
        except BadVersionError:
            data, stat = await session.get(path)
            current = zn.decode_or_skip(zn.PartitionState.from_json, data, path)
            if current is None or current.leader != broker_id or current.leader_epoch != part.leader_epoch \
                    or list(current.isr) != list(new_isr):
                log.info("ISR update of %s-%d lost a race (zk version %d is stale); the controller has moved on",
                         part.topic, part.index, part.zk_version)
                return None
        except NoNodeError:
            return None
        now = self.clock.monotonic_ms()
        if not self._changes:
            self._first_ms = now
        self._last_ms = now
        self._changes.add(zn.TopicPartition(part.topic, part.index))
        return stat.version

    async def tick(self) -> None:
        """Announce the changes collected so far once they have been quiet long enough (or waited too long)."""
        if not self._changes or self.membership.session is None:
            return
        now = self.clock.monotonic_ms()
        if now - self._last_ms < self.quiet_ms and now - self._first_ms < self.max_delay_ms:
            return
        changes, self._changes = frozenset(self._changes), set()
        await self.membership.current().create(
            zn.ISR_CHANGE_PREFIX, zn.IsrChangeNotification(changes).to_json(), sequential=True
        )
