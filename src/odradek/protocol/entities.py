"""kio entities: encoding and decoding them over :mod:`odradek.protocol.client`'s connections (which header
versions an API version uses, the body bytes in and out), and the questions the request path asks of a decoded one
only after its handler failed.

The codec half is kept apart from the connections so the Spark source, which reads Fetch without kio, does not
import kio's schema index. The other half exists because kio decodes a null (length -1) even where the schema
forbids one, and the handler then fails on it. Telling such a malformed request from a bug in the handler matters:
the first is the client's fault (its connection is closed), the second ours (logged as an internal error,
UNKNOWN_SERVER_ERROR to the client). Walking every request on the hot path would cost every produce; walking one
only after its handler failed costs nothing.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import types
import typing
import uuid
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from odradek.protocol.bounds import check_lengths
from odradek.protocol.wire import Buffer

__all__ = ["EntitySchemas", "decode_entity", "default_of", "empty_entity", "encode_entity", "entity_schemas",
           "forbidden_null"]


@dataclass(frozen=True, slots=True)
class EntitySchemas:
    request: type[Any]
    response: type[Any]
    flexible_request: bool
    """Request header v2 (flexible API version) rather than v1."""
    flexible_response: bool
    """Response header v1; ApiVersions answers with v0 at every version, so this is not ``flexible_request``."""


@functools.cache
def entity_schemas(api_key: int, api_version: int) -> EntitySchemas:
    request = load_request_schema(api_key, api_version)
    response = load_response_schema(api_key, api_version)
    return EntitySchemas(request, response, bool(request.__header_schema__.__flexible__),
                         bool(response.__header_schema__.__flexible__))


def encode_entity(entity: Any) -> memoryview:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getbuffer()


def decode_entity(cls: type[Any], frame: Buffer, offset: int) -> Any:
    """Decode a response; its lengths are checked first, as a request's are (a broken or hostile peer must not be
    able to make kio allocate what it claims). Raises :class:`~odradek.protocol.bounds.LengthError`."""
    check_lengths(cls, frame, offset)
    entity, _size = entity_reader(cls)(frame, offset)
    return entity


_NULLABLE: dict[type[Any], dict[str, bool]] = {}


def _nullable_fields(cls: type[Any]) -> dict[str, bool]:
    found = _NULLABLE.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = {}
        for f in dataclasses.fields(cls):
            hint = hints.get(f.name)
            found[f.name] = _is_union(hint) and type(None) in typing.get_args(hint)
        _NULLABLE[cls] = found
    return found


def _is_union(hint: Any) -> bool:
    return isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union


def forbidden_null(entity: Any, path: str = "") -> str | None:
    """The dotted path of the first field that is null though its schema forbids it, or None."""
    if not dataclasses.is_dataclass(entity) or isinstance(entity, type):
        return None
    for name, nullable in _nullable_fields(type(entity)).items():
        value = getattr(entity, name)
        where = f"{path}.{name}" if path else name
        if value is None:
            if not nullable:
                return where
        elif isinstance(value, tuple):
            for item in value:
                found = forbidden_null(item, where)
                if found:
                    return found
        else:
            found = forbidden_null(value, where)
            if found:
                return found
    return None


def default_of(hint: Any) -> Any:
    """A neutral value for a field of type ``hint``: what an error response carries where it has nothing to say."""
    if _is_union(hint):
        return None if type(None) in typing.get_args(hint) else default_of(typing.get_args(hint)[0])
    origin = typing.get_origin(hint)
    if origin is tuple:
        return ()
    if dataclasses.is_dataclass(hint):
        return empty_entity(hint)  # type: ignore[arg-type]
    base = hint if isinstance(hint, type) else origin
    if base is None:
        return None
    if issubclass(base, bool):
        return False
    if issubclass(base, int):
        return base(0)
    if issubclass(base, float):
        return 0.0
    if issubclass(base, str):
        return ""
    if issubclass(base, bytes):
        return b""
    if issubclass(base, datetime.timedelta):
        return datetime.timedelta(0)
    if issubclass(base, uuid.UUID):
        return uuid.UUID(int=0)
    return None


def empty_entity(cls: type[Any], **values: Any) -> Any:
    """An instance of kio entity ``cls`` with neutral values in every field but those given."""
    hints = typing.get_type_hints(cls)
    kwargs = {f.name: values[f.name] if f.name in values else default_of(hints[f.name])
              for f in dataclasses.fields(cls)}
    return cls(**kwargs)
