"""The ZooKeeper client keeps at most MAX_IN_FLIGHT requests on the wire and queues the rest, in order.

Without the bound, a controller writing tens of thousands of znodes filled ZooKeeper's single request pipeline and
every other client's pings waited behind it until their sessions expired.
"""

from __future__ import annotations

import struct

from kazoo.protocol.serialization import Exists

from odradek.coordination.store import SessionState
from odradek.coordination.zkwire import MAX_IN_FLIGHT, REFILL_AT, ZkWire


class _Transport:
    def __init__(self) -> None:
        self.frames = 0

    def write(self, data: bytes) -> None:
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack_from("!i", data, offset)
            offset += 4 + length
            self.frames += 1


def _reply(xid: int) -> bytes:
    return struct.pack("!iqi", xid, 1, -101)  # ReplyHeader(xid, zxid, NONODE): Exists answers "absent", no body


async def test_requests_beyond_the_window_wait_and_go_out_in_order_as_replies_come() -> None:
    wire = ZkWire("127.0.0.1:1", 6000, lambda _s: None, lambda _c, _p: None, lambda: ([], [], []))
    transport = _Transport()
    wire._transport = transport  # type: ignore[assignment]
    wire.state = SessionState.CONNECTED
    answered: list[str] = []
    total = MAX_IN_FLIGHT * 3
    wire.send_many((Exists(f"/n{i}", False), lambda _r, e, i=i: answered.append(f"/n{i}" if e is None else "x"))
                   for i in range(total))
    # the window stays full (refilled in batches) until the queue is drained, and order is kept
    assert transport.frames == MAX_IN_FLIGHT
    assert len(wire._pending) == MAX_IN_FLIGHT and len(wire._backlog) == total - MAX_IN_FLIGHT
    while wire._pending:
        xid = wire._pending[0][0]
        wire._frame(_reply(xid))
        assert len(wire._pending) <= MAX_IN_FLIGHT
        if wire._backlog:
            assert len(wire._pending) > REFILL_AT - 1
    assert transport.frames == total
    assert answered == [f"/n{i}" for i in range(total)]

