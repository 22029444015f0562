"""Cluster-wide blocks of producer ids in ``/latest_producer_id_block``, as ZooKeeper-era Kafka reserves them.

Two brokers handing out the same id would make their producers' sequence numbers collide on every partition, so
each block is reserved by compare-and-set on one znode before any id of it is used. The JSON is Kafka's: inclusive
``block_start`` and ``block_end`` as strings.
"""

from __future__ import annotations

import json

from odradek.broker.link.membership import Membership
from odradek.coordination import BadVersionError, NodeExistsError, NoNodeError
from odradek.errors import ErrorCode, KafkaError

PRODUCER_ID_BLOCK = "/latest_producer_id_block"


def block_json(broker_id: int, start: int, end_inclusive: int) -> bytes:
    return json.dumps({"version": 1, "broker": broker_id, "block_start": str(start),
                       "block_end": str(end_inclusive)}).encode()


class ProducerIdBlocks:
    def __init__(self, membership: Membership) -> None:
        self.membership = membership

    async def allocate(self, size: int) -> tuple[int, int]:
        """Reserve the next ``size`` ids for this broker; returns (first id, end exclusive)."""
        session = self.membership.current()
        broker_id = self.membership.broker_id
        for _attempt in range(100):
            try:
                data, stat = await session.get(PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    await session.create(PRODUCER_ID_BLOCK, block_json(broker_id, 0, size - 1))
                except NodeExistsError:
                    continue
                return 0, size
            start = int(json.loads(data)["block_end"]) + 1
            try:
                await session.set(PRODUCER_ID_BLOCK, block_json(broker_id, start, start + size - 1),
                                  expected_version=stat.version)
            except BadVersionError:
                continue
            return start, start + size
        raise KafkaError(ErrorCode.coordinator_not_available, "could not reserve a block of producer ids")
