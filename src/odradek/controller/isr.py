"""ISR change notifications (seed 001 section 8.2.4, ``IsrChangeNotificationListener``): partition leaders write
their ISR changes themselves and leave a notification; the controller re-reads those partitions, tells every
broker, and sees whether a reassignment waiting on the ISR can finish.
"""

from __future__ import annotations

from odradek.controller.events import IsrChangeNotification
from odradek.controller.plan import Plan
from odradek.controller.reassignment import ReassignmentManager
from odradek.controller.shared import Shared

__all__ = ["IsrChangeManager"]


class IsrChangeManager:
    def __init__(self, shared: Shared, reassignment: ReassignmentManager) -> None:
        self._shared = shared
        self._reassignment = reassignment

    async def arm(self) -> None:
        """Watch for notifications (failover); the first batch is handled as an event of its own."""
        shared = self._shared
        await shared.store.isr_change_notifications(shared.watch("isr", IsrChangeNotification))

    async def on_notification(self) -> None:
        shared = self._shared
        ctx = shared.ctx
        paths, partitions = await shared.store.isr_change_notifications(shared.watch("isr", IsrChangeNotification))
        try:
            known = sorted(tp for tp in partitions if tp in ctx.assignments)
            if known:
                ctx.leadership.update(await shared.store.states(known))
                shared.batch.add_update_metadata(ctx.live_or_shutting_down, known)
                for tp in known:
                    if tp in ctx.being_reassigned:
                        await self._reassignment.maybe_complete(tp)
        finally:
            await shared.applier.apply(Plan(consumed=paths))
