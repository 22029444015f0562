"""Kafka's framing and headers, and the flexible-version primitives, shared by every odradek client and codec.

A Kafka frame is an int32 size and that many bytes. A request starts with header v1 (api key, api version,
correlation id, nullable int16-length client id) or, for flexible API versions, header v2 (v1 plus a tagged-field
buffer); a response starts with header v0 (correlation id) or v1 (v0 plus a tagged-field buffer). The blocking
and asyncio connections (:mod:`odradek.protocol.client`), the controller's codec and the broker all frame with
these functions, so the bytes one side writes are the bytes the other reads.

Readers take ``bytes`` (indexing gives ints without a copy) and raise :class:`WireFormatError`, a ``ValueError``,
on anything that does not fit: callers turn it into a closed connection, never a crash.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "SIZE",
    "Buffer",
    "RequestHeader",
    "WireFormatError",
    "compact_string",
    "nullable_compact_string",
    "read_compact_string",
    "read_nullable_compact_string",
    "read_request_header",
    "read_response_header",
    "read_uvarint",
    "request_header",
    "response_header",
    "skip_tagged_fields",
    "uvarint",
]

Buffer = bytes | bytearray | memoryview
SIZE = struct.Struct(">i")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_CLIENT_ID_LENGTH = struct.Struct(">h")
_MAX_VARINT_BYTES = 5  # an unsigned varint holding 32 bits; Kafka rejects longer ones


class WireFormatError(ValueError):
    """Bytes that are not the Kafka encoding they claim to be."""


# -------------------------------------------------------------------------------------------- varints


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint: 7 bits a byte, low bits first, high bit set on all but the last byte."""
    if 0 <= value < 0x80:
        return bytes((value,))
    if value < 0 or value > 0xFFFFFFFF:
        raise WireFormatError(f"{value} does not fit an unsigned varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    value = 0
    shift = 0
    for i in range(pos, min(pos + _MAX_VARINT_BYTES, len(buf))):
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i + 1
        shift += 7
    if len(buf) - pos < _MAX_VARINT_BYTES:
        raise WireFormatError(f"varint at byte {pos} runs past the end")
    raise WireFormatError(f"varint at byte {pos} is longer than {_MAX_VARINT_BYTES} bytes")


# ------------------------------------------------------------------------------------ strings, tags


def compact_string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def nullable_compact_string(value: str | None) -> bytes:
    return b"\x00" if value is None else compact_string(value)


def read_nullable_compact_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    length = buf[pos] if pos < len(buf) else 0x80  # 0x80 sends a missing byte down the checked path
    if length & 0x80:
        length, pos = read_uvarint(buf, pos)
    else:
        pos += 1
    if length == 0:
        return None, pos
    end = pos + length - 1
    if end > len(buf):
        raise WireFormatError(f"string of {length - 1} bytes at byte {pos} runs past the end")
    try:
        return buf[pos:end].decode("utf-8"), end
    except UnicodeDecodeError as exc:
        raise WireFormatError(f"string at byte {pos} is not UTF-8: {exc.reason}") from None


def read_compact_string(buf: bytes, pos: int) -> tuple[str, int]:
    value, end = read_nullable_compact_string(buf, pos)
    if value is None:
        raise WireFormatError(f"null string at byte {pos} where the schema allows none")
    return value, end


def skip_tagged_fields(buf: Buffer, pos: int) -> int:
    """Skip a tagged-field buffer: none of the versions odradek serves defines a tag, and unknown tags are ignored,
    as Kafka's readers ignore them."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise WireFormatError("tagged field runs past the end")
    return pos


# -------------------------------------------------------------------------------------------- headers


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   flexible: bool) -> bytes:
    """Request header v2 when ``flexible`` (the API version is flexible), else v1."""
    if client_id is None:
        cid = _CLIENT_ID_LENGTH.pack(-1)
    else:
        raw = client_id.encode("utf-8")
        cid = _CLIENT_ID_LENGTH.pack(len(raw)) + raw
    head = _KEY_VERSION_CORRELATION.pack(api_key, api_version, correlation_id) + cid
    return head + b"\x00" if flexible else head


def read_request_header(frame: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """Header (v2 when ``flexible``, else v1) of a request frame without its size prefix, and where the body starts."""
    if len(frame) < _KEY_VERSION_CORRELATION.size + _CLIENT_ID_LENGTH.size:
        raise WireFormatError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    (length,) = _CLIENT_ID_LENGTH.unpack_from(frame, _KEY_VERSION_CORRELATION.size)
    pos = _KEY_VERSION_CORRELATION.size + _CLIENT_ID_LENGTH.size
    client_id: str | None = None
    if length >= 0:
        if pos + length > len(frame):
            raise WireFormatError(f"client id of {length} bytes runs past the end of the request")
        client_id = frame[pos : pos + length].decode("utf-8", "replace")
        pos += length
    elif length != -1:
        raise WireFormatError(f"client id length {length}")
    if flexible:
        pos = skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v1 when ``flexible``, else v0."""
    return SIZE.pack(correlation_id) + (b"\x00" if flexible else b"")


def read_response_header(frame: Buffer, flexible: bool) -> tuple[int, int]:
    """Correlation id of a response frame without its size prefix, and where the body starts."""
    if len(frame) < 4:
        raise WireFormatError(f"response of {len(frame)} bytes is shorter than a response header")
    (correlation_id,) = SIZE.unpack_from(frame, 0)
    return correlation_id, skip_tagged_fields(frame, 4) if flexible else 4
