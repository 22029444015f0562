"""The package's threaded cluster (odradek.testing) with the views the cluster tests read brokers' state through."""

from __future__ import annotations

from typing import Any

from odradek.testing import ThreadedCluster as _PackageCluster


class ThreadedCluster(_PackageCluster):
    def controller_epoch(self, broker_id: int) -> int:
        return self.run(lambda: self.cluster.brokers[broker_id].controller.epoch)

    def leader_of(self, topic: str, partition: int) -> int:
        """The leader as the brokers themselves see it (a live broker's metadata cache)."""

        def find() -> int:
            for b in self.cluster.brokers.values():
                if b.running and not b.faults.paused:
                    leader = b.metadata.leader_for(topic, partition)
                    if leader is not None:
                        return leader
            return -1

        return self.run(find)

    def leaders_seen(self, topic: str, partition: int) -> set[int]:
        """The leader in every running broker's metadata cache (one element once they all agree). A client may
        bootstrap from any of them, a just-restarted one included, whose cache is the last to hear of a change."""

        def find() -> set[int]:
            leaders = (b.metadata.leader_for(topic, partition)
                       for b in self.cluster.brokers.values() if b.running and not b.faults.paused)
            return {-1 if leader is None else leader for leader in leaders}

        return self.run(find)

    def partition_meta(self, topic: str, partition: int) -> Any:
        def find() -> Any:
            for b in self.cluster.brokers.values():
                if b.running and not b.faults.paused and topic in b.metadata.topics:
                    return b.metadata.topics[topic].partitions.get(partition)
            return None

        return self.run(find)

    def full_isr(self, topic: str, partitions: int) -> bool:
        """Every partition of ``topic`` has every broker of the cluster in its ISR (as the brokers see it)."""
        everyone = sorted(self.cluster.brokers)
        metas = [self.partition_meta(topic, p) for p in range(partitions)]
        return all(m is not None and sorted(m.isr) == everyone for m in metas)

    # --- views used by the acceptance tests ----------------------------------------------------------------

    def broker(self, broker_id: int) -> Any:
        return self.cluster.brokers[broker_id]

    def znode(self, path: str) -> bytes | None:
        """The data at ``path`` in the coordination store (None when absent), read through a live broker's session."""

        async def read() -> bytes | None:
            from odradek.coordination import NoNodeError

            for b in self.cluster.brokers.values():
                if b.running and not b.faults.paused and b.membership.session is not None:
                    try:
                        data, _stat = await b.membership.session.get(path)
                    except NoNodeError:
                        return None
                    return data
            raise RuntimeError("no live broker to read the store through")

        return self.call(read())

    def controller_idle(self) -> None:
        """Wait until the active controller has processed every event queued so far."""

        async def idle() -> None:
            for b in self.cluster.brokers.values():
                if b.running and b.controller.is_active:
                    await b.controller.wait_idle()

        self.call(idle())
