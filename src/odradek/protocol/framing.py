"""What the broker's request path needs beyond :mod:`odradek.protocol.wire`: the first look at a frame, kio's schema
for its API version, and the body decoded with it.

Every Kafka request is an int32 size followed by that many bytes: a header whose layout depends on the API's
version (v1 for non-flexible versions, v2 with tagged fields for flexible ones; :func:`odradek.protocol.wire.
read_request_header` reads both), then the body. We read the api key and version first, look the schema up, and only
then know how to parse the rest. Anything we cannot parse raises :class:`FrameError`, which the connection turns
into one log line and a closed socket.
"""

from __future__ import annotations

import functools
import struct
from typing import Any

from kio.index import load_request_schema
from kio.serial import entity_reader

from odradek.protocol.bounds import check_lengths
from odradek.protocol.wire import WireFormatError

KEY_VERSION_CORRELATION = struct.Struct(">hhi")


class FrameError(Exception):
    """A request we cannot parse: the connection is closed after one clear log line."""


def peek_key_version(frame: bytes | memoryview) -> tuple[int, int, int]:
    """api key, api version and correlation id: the fixed prefix every header version shares."""
    if len(frame) < 8:
        raise FrameError(f"request of {len(frame)} bytes is shorter than a request header")
    key, version, correlation = KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    return key, version, correlation


def decode_body(frame: bytes | memoryview, schema: type[Any], offset: int) -> Any:
    """Decode the request body; trailing bytes are tolerated, as Kafka's parser does for forward compatibility.
    Every length is checked first (:mod:`odradek.protocol.bounds`): kio would allocate what a hostile one claims."""
    try:
        check_lengths(schema, frame, offset)
    except WireFormatError as exc:
        raise FrameError(f"malformed {schema.__name__} body: {exc}") from exc
    try:
        body, _size = entity_reader(schema)(frame, offset)
    except Exception as exc:
        raise FrameError(f"malformed {schema.__name__} body: {exc}") from exc
    return body


@functools.cache
def request_schema(api_key: int, api_version: int) -> type[Any] | None:
    """kio's request class (None where kio has none); cached: kio resolves it by module name on every call, a few
    per cent of a broker's CPU under a stream of small requests."""
    try:
        return load_request_schema(api_key, api_version)
    except Exception:
        return None
