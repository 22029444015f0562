"""kio entities over :mod:`odradek.protocol.client`'s connections: which header versions an API version uses, and
the body bytes in and out. Kept apart from the connections so the Spark source, which reads Fetch without kio,
does not import kio's schema index."""

from __future__ import annotations

import functools
import io
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from odradek.protocol.wire import Buffer

__all__ = ["EntitySchemas", "decode_entity", "encode_entity", "entity_schemas"]


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
    entity, _size = entity_reader(cls)(frame, offset)
    return entity
