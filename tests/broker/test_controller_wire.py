"""The controller APIs over a real socket: advertised at the versions served, answered in Kafka's framing, and any
other version or a malformed body closes the connection with a log line while the broker keeps serving."""

from __future__ import annotations

import asyncio
import struct

from brokers import BrokerProcess, peer_closed, raw_socket, wait_for
from odradek.admin import metadata
from odradek.broker.link.resent_requests import LARGE_BODY, ResentRequests
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode
from odradek.protocol.client import BlockingConnection
from odradek.protocol.controller_requests import (
    CONTROLLER_API_KEYS,
    LEADER_AND_ISR,
    VERSIONS,
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    decode_response,
    encode_body,
)
from odradek.protocol.wire import request_header

# From a controller of epoch 0: older than the epoch-1 controller every fresh cluster (of one, here) elects first.
LAIR = LeaderAndIsrRequest(0, 0, -1, [LeaderAndIsrPartitionState("t", 0, 0, 0, 1, [0], 0, [0])],
                           [LeaderAndIsrLiveLeader(0, "127.0.0.1", 9092)])


def test_controller_apis_are_advertised_and_answered_at_the_served_versions(broker: BrokerProcess) -> None:
    with KafkaConnection(broker.bootstrap) as conn:
        assert {key: conn.versions[key] for key in CONTROLLER_API_KEYS} == {
            key: (version, version) for key, version in VERSIONS.items()}
        # the broker has heard from its own controller (epoch 1) once its metadata names one
        wait_for(lambda: metadata(conn, []).controller_id == 0, 30, what="the broker's controller")
    # a zombie controller is refused, in Kafka's format, and nothing changes
    assert _send(broker, LAIR) == LeaderAndIsrResponse(int(ErrorCode.stale_controller_epoch))
    with KafkaConnection(broker.bootstrap) as conn:
        assert [t.name for t in metadata(conn, None).topics] == []


def test_other_versions_and_malformed_bodies_close_the_connection(broker: BrokerProcess) -> None:
    body = encode_body(LAIR)
    old_version = request_header(LEADER_AND_ISR, 0, 1, None, flexible=False) + body
    truncated = request_header(LEADER_AND_ISR, 4, 1, None, flexible=True) + body[:-1]
    for bad in (old_version, truncated):
        sock = raw_socket(broker)
        sock.sendall(struct.pack(">i", len(bad)) + bad)
        assert peer_closed(sock)
        sock.close()
    wait_for(lambda: "refusing LeaderAndIsr v0 from its controller: odradek speaks" in broker.log_text(),
             what="version log line")
    wait_for(lambda: "malformed controller request (API 4 v4)" in broker.log_text(), what="malformed log line")
    with KafkaConnection(broker.bootstrap) as conn:
        assert LEADER_AND_ISR in conn.versions


def _send(broker: BrokerProcess, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    host, port = broker.bootstrap.rsplit(":", 1)
    conn = BlockingConnection(host, int(port), "test", timeout=30)
    try:
        frame, offset = conn.request(LEADER_AND_ISR, 4, encode_body(request), flexible_request=True,
                                     flexible_response=True)
    finally:
        conn.close()
    response = decode_response(LEADER_AND_ISR, frame[offset:])
    assert isinstance(response, LeaderAndIsrResponse)
    return response


def test_a_big_request_sent_again_is_answered_by_its_first_application(broker: BrokerProcess) -> None:
    """The controller resends a request whose answer timed out, on a new connection: the same bytes get the first
    copy's response without being decoded and applied again, until any other controller request comes."""
    big = LeaderAndIsrRequest(0, 0, -1, [LeaderAndIsrPartitionState(f"topic-{i}", 0, 0, 0, 1, [0], 0, [0])
                                         for i in range(6000)], [LeaderAndIsrLiveLeader(0, "127.0.0.1", 9092)])
    assert len(encode_body(big)) > LARGE_BODY
    resends = "is a resend of the one applied before it"
    first = _send(broker, big)
    assert first == LeaderAndIsrResponse(int(ErrorCode.stale_controller_epoch))
    assert _send(broker, big) == first
    wait_for(lambda: broker.log_text().count(resends) == 1, what="the resend answered from the first")
    assert _send(broker, LAIR) == first  # another request: the queue moved on
    assert _send(broker, big) == first
    assert broker.log_text().count(resends) == 1, "after another request, the same bytes are applied afresh"


async def test_a_resend_waits_for_the_first_copy_still_being_applied() -> None:
    resent = ResentRequests()
    body = bytes(LARGE_BODY + 1)
    assert resent.begin(LEADER_AND_ISR, b"small") is None, "small requests are cheap to apply again"
    pending = resent.begin(LEADER_AND_ISR, body)
    assert pending is not None
    assert resent.first_of(LEADER_AND_ISR, body) is pending
    waiter = asyncio.ensure_future(asyncio.shield(pending))
    pending.set_result(b"response")
    assert await waiter == b"response"
    resent.abandon(pending)
    assert resent.first_of(LEADER_AND_ISR, body) is None
    again = resent.begin(LEADER_AND_ISR, body)
    assert again is not None
    assert resent.first_of(LEADER_AND_ISR + 2, body) is None  # another API: forgotten
    assert resent.first_of(LEADER_AND_ISR, body) is None

