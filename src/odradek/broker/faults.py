"""What fault injection can do to a running broker: pause it (as SIGSTOP) or cut it off (as a network partition).

One small object that the listener, the connections, the follower fetchers, the controller and its sends all
consult, so each of them can stand still or drop its sockets without holding a reference to the broker itself.
"""

from __future__ import annotations

import asyncio


class FaultState:
    def __init__(self) -> None:
        # Cleared while paused: requests, fetchers, background ticks, the controller and its sends all wait on it,
        # as the threads of a SIGSTOPped Kafka process would.
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.isolated = False

    @property
    def paused(self) -> bool:
        return not self.resumed.is_set()
