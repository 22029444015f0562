"""Kafka framing and the client connections built on it: headers checked against kio's own header codecs, varints
and compact strings against hand-written bytes, and both connections against a scripted server."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as KioResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeaderV1
from kio.serial import entity_reader

from odradek.protocol.client import AsyncConnection, BlockingConnection, ResponseError
from odradek.protocol.wire import (
    RequestHeader,
    WireFormatError,
    compact_string,
    nullable_compact_string,
    read_compact_string,
    read_nullable_compact_string,
    read_request_header,
    read_response_header,
    read_uvarint,
    request_header,
    response_header,
    skip_tagged_fields,
    uvarint,
)

# ------------------------------------------------------------------------------------------ headers


def test_request_headers_are_kafkas_v1_and_v2() -> None:
    v1 = request_header(3, 12, 42, "cli", flexible=False)
    assert v1 == b"\x00\x03\x00\x0c\x00\x00\x00\x2a\x00\x03cli"
    v2 = request_header(4, 4, 42, None, flexible=True)
    assert v2 == b"\x00\x04\x00\x04\x00\x00\x00\x2a\xff\xff\x00"
    kio_v1, size = entity_reader(KioRequestHeaderV1)(v1, 0)
    assert (kio_v1.request_api_key, kio_v1.request_api_version, kio_v1.correlation_id, kio_v1.client_id, size) == (
        3, 12, 42, "cli", len(v1))
    kio_v2, size = entity_reader(KioRequestHeaderV2)(v2, 0)
    assert (kio_v2.request_api_key, kio_v2.client_id, size) == (4, None, len(v2))
    assert read_request_header(v1 + b"body", flexible=False) == (RequestHeader(3, 12, 42, "cli"), len(v1))
    assert read_request_header(v2 + b"body", flexible=True) == (RequestHeader(4, 4, 42, None), len(v2))


def test_response_headers_are_kafkas_v0_and_v1() -> None:
    assert response_header(7, flexible=False) == b"\x00\x00\x00\x07"
    assert response_header(7, flexible=True) == b"\x00\x00\x00\x07\x00"
    assert entity_reader(KioResponseHeaderV0)(response_header(7, False), 0)[0].correlation_id == 7
    assert entity_reader(KioResponseHeaderV1)(response_header(7, True), 0)[1] == 5
    assert read_response_header(b"\x00\x00\x00\x07\x01\x00\x02ab" + b"body", flexible=True) == (7, 9)
    assert read_response_header(b"\x00\x00\x00\x07\x01", flexible=False) == (7, 4)


@pytest.mark.parametrize(("frame", "flexible", "reason"), [
    (b"\x00\x04\x00\x04\x00", True, "shorter than a request header"),
    (b"\x00\x04\x00\x04\x00\x00\x00\x01\x00\x09abc", False, "runs past the end"),
    (b"\x00\x04\x00\x04\x00\x00\x00\x01\xff\xfe", False, "client id length -2"),
    (b"\x00\x04\x00\x04\x00\x00\x00\x01\xff\xff", True, "runs past the end"),  # no tagged-field buffer
])
def test_bad_request_headers_are_refused(frame, flexible, reason) -> None:
    with pytest.raises(WireFormatError, match=reason):
        read_request_header(frame, flexible)


def test_bad_response_headers_are_refused() -> None:
    with pytest.raises(WireFormatError, match="shorter"):
        read_response_header(b"\x00\x00", flexible=False)
    with pytest.raises(WireFormatError, match="past the end"):
        read_response_header(b"\x00\x00\x00\x01\x01\x05", flexible=True)  # a tagged field without its size


# ------------------------------------------------------------------------------ varints, strings, tags


def test_varints_are_kafkas() -> None:
    assert uvarint(0) == b"\x00" and uvarint(127) == b"\x7f" and uvarint(300) == b"\xac\x02"
    assert uvarint(2**32 - 1) == b"\xff\xff\xff\xff\x0f"
    assert read_uvarint(b"\x00\xac\x02", 1) == (300, 3)
    for bad in (-1, 2**32):
        with pytest.raises(WireFormatError):
            uvarint(bad)
    with pytest.raises(WireFormatError, match="runs past the end"):
        read_uvarint(b"\xac", 0)
    with pytest.raises(WireFormatError, match="longer than 5 bytes"):
        read_uvarint(b"\xff" * 6, 0)


@given(st.integers(0, 2**32 - 1))
def test_varints_round_trip(value) -> None:
    assert read_uvarint(b"x" + uvarint(value), 1) == (value, 1 + len(uvarint(value)))


@given(st.text(), st.none() | st.text())
def test_compact_strings_round_trip(text, nullable) -> None:
    assert read_compact_string(compact_string(text), 0) == (text, len(compact_string(text)))
    encoded = nullable_compact_string(nullable)
    assert read_nullable_compact_string(encoded, 0) == (nullable, len(encoded))


def test_bad_compact_strings_are_refused() -> None:
    assert compact_string("ab") == b"\x03ab" and nullable_compact_string(None) == b"\x00"
    with pytest.raises(WireFormatError, match="null string"):
        read_compact_string(b"\x00", 0)
    with pytest.raises(WireFormatError, match="not UTF-8"):
        read_compact_string(b"\x02\xff", 0)
    with pytest.raises(WireFormatError, match="runs past the end"):
        read_compact_string(b"\x05ab", 0)
    with pytest.raises(WireFormatError, match="runs past the end"):
        read_compact_string(b"", 0)


def test_tagged_fields_are_skipped_whole() -> None:
    assert skip_tagged_fields(b"\x00", 0) == 1
    assert skip_tagged_fields(b"\x02\x00\x01a\x81\x01\x02bc!", 0) == 9  # "!" follows
    with pytest.raises(WireFormatError):
        skip_tagged_fields(b"\x01\x00\x05ab", 0)


# ------------------------------------------------------------------------------------------ connections

Reply = Callable[[RequestHeader, bytes], bytes]
"""Given a request (read with header v2), the whole response frame to write back."""


def answer(correlation_id: int, body: bytes, flexible: bool = True) -> bytes:
    payload = response_header(correlation_id, flexible) + body
    return struct.pack(">i", len(payload)) + payload


def echo(header: RequestHeader, body: bytes) -> bytes:
    return answer(header.correlation_id, f"{header.api_key}/{header.api_version}/{header.client_id}:".encode() + body)


@contextmanager
def blocking_server(reply: Reply) -> Iterator[int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn, suppress(ConnectionError):  # the client closes on a response it cannot use
            while (prefix := conn.recv(4, socket.MSG_WAITALL)) and len(prefix) == 4:
                frame = conn.recv(struct.unpack(">i", prefix)[0], socket.MSG_WAITALL)
                header, offset = read_request_header(frame, flexible=True)
                conn.sendall(reply(header, frame[offset:]))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        thread.join(timeout=10)


def test_blocking_connection_frames_and_checks_correlation_ids() -> None:
    with blocking_server(echo) as port:
        conn = BlockingConnection("127.0.0.1", port, "me", timeout=10)
        frame, offset = conn.request(4, 4, b"hello", flexible_request=True, flexible_response=True)
        assert bytes(frame[offset:]) == b"4/4/me:hello" and offset == 5
        first = conn.send(6, 6, b"a", flexible=True)  # two in flight: answers come back in order
        second = conn.send(6, 6, b"b", flexible=True)
        assert second == first + 1
        assert bytes(conn.receive(first, flexible=True)[0][5:]) == b"6/6/me:a"
        assert bytes(conn.receive(second, flexible=True)[0][5:]) == b"6/6/me:b"
        conn.close()


@pytest.mark.parametrize(("reply", "error"), [
    (lambda header, body: answer(header.correlation_id + 1, b""), "correlation id"),
    (lambda header, body: struct.pack(">i", 2) + b"\x00\x00", "response size 2 out of range"),
    (lambda header, body: struct.pack(">i", 5) + b"\x00\x00\x00\x01\x05", "malformed response header"),
])
def test_blocking_connection_closes_on_a_response_it_cannot_use(reply, error) -> None:
    with blocking_server(reply) as port:
        conn = BlockingConnection("127.0.0.1", port, None, timeout=10)
        with pytest.raises(ResponseError, match=error):
            conn.request(4, 4, b"", flexible_request=True, flexible_response=True)
        with pytest.raises(OSError):  # closed: nothing more goes out on a stream that is out of step
            conn.send(4, 4, b"", flexible=True)


async def start(reply: Reply) -> tuple[asyncio.Server, int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                header, offset = read_request_header(frame, flexible=True)
                response = reply(header, frame[offset:])
                if response:
                    writer.write(response)
                    await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.timeout(30, func_only=True)
async def test_async_connection_orders_concurrent_requests() -> None:
    server, port = await start(echo)
    conn = await AsyncConnection.open("127.0.0.1", port, "me", timeout=5)
    try:
        results = await asyncio.gather(*(
            conn.request(5, 3, str(i).encode(), flexible_request=True, flexible_response=True) for i in range(5)))
        assert [frame[offset:] for frame, offset in results] == [f"5/3/me:{i}".encode() for i in range(5)]
    finally:
        conn.close()
        await conn.wait_closed()
        server.close()
        await server.wait_closed()


@pytest.mark.timeout(30, func_only=True)
async def test_async_connection_closes_on_timeout_and_on_a_mismatched_answer() -> None:
    server, port = await start(lambda header, body: b"" if body == b"silent" else answer(7, b""))
    try:
        conn = await AsyncConnection.open("127.0.0.1", port, None, timeout=5)
        with pytest.raises(TimeoutError):
            await conn.request(4, 4, b"silent", flexible_request=True, flexible_response=True, timeout=0.05)
        assert conn.closed
        with pytest.raises(ConnectionError, match="closed"):
            await conn.request(4, 4, b"", flexible_request=True, flexible_response=True)
        conn = await AsyncConnection.open("127.0.0.1", port, None, timeout=5)
        with pytest.raises(ResponseError, match="correlation id 7 does not match request 1"):
            await conn.request(4, 4, b"", flexible_request=True, flexible_response=True)
        assert conn.closed
    finally:
        server.close()
        await server.wait_closed()
