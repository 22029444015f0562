"""The three formats behind one interface: parse (with references), the stored text, and compatibility.

Each format module parses with its own well-kept library and decides compatibility by its own rules; this module
picks the module by ``schemaType`` and applies the compatibility levels (which previous versions a new schema is
checked against, in which direction).
"""

from __future__ import annotations

from collections.abc import Sequence

from odradek.schema_registry import errors
from odradek.schema_registry.parsed import Dependency, Parsed

TYPES = ("JSON", "PROTOBUF", "AVRO")
LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


def parse(schema_type: str, text: str, dependencies: Sequence[Dependency]) -> Parsed:
    """Parse ``text`` as ``schema_type``; an unparsable schema raises Confluent's 42201."""
    if schema_type == "AVRO":
        from odradek.schema_registry import avro_format
        return avro_format.parse(text, dependencies)
    if schema_type == "JSON":
        from odradek.schema_registry import json_format
        return json_format.parse(text, dependencies)
    if schema_type == "PROTOBUF":
        from odradek.schema_registry import protobuf_format
        return protobuf_format.parse(text, dependencies)
    raise errors.invalid_schema(f"of unknown type {schema_type}")


def check(level: str, new: Parsed, previous: Sequence[Parsed]) -> list[str]:
    """The messages of every incompatibility of ``new`` with ``previous`` (oldest first) under ``level``."""
    if level == "NONE" or not previous:
        return []
    against = list(previous) if level.endswith("_TRANSITIVE") else [previous[-1]]
    messages: list[str] = []
    for old in reversed(against):
        if level.startswith(("BACKWARD", "FULL")):
            messages += new.incompatibilities(old)
        if level.startswith(("FORWARD", "FULL")):
            messages += old.incompatibilities(new)
    return messages
