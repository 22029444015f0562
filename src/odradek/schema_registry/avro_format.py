"""Avro schemas: parsed by Apache Avro's Python library, compatibility by its ReaderWriterCompatibilityChecker
(the port of Avro's Java SchemaCompatibility that Confluent's registry calls)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import avro.compatibility
import avro.errors
import avro.name
import avro.schema

from odradek.schema_registry import errors
from odradek.schema_registry.parsed import Dependency, Parsed


class AvroSchema:
    def __init__(self, schema: avro.schema.Schema, data: Any) -> None:
        self.schema = schema
        self.data = data

    def canonical(self) -> str:
        """The schema's JSON as given, without insignificant whitespace (referenced types stay references)."""
        return json.dumps(self.data, separators=(",", ":"))

    def normalized(self) -> str:
        return str(self.schema.canonical_form)

    def incompatibilities(self, writer: Parsed) -> list[str]:
        assert isinstance(writer, AvroSchema)
        result = avro.compatibility.ReaderWriterCompatibilityChecker().get_compatibility(self.schema, writer.schema)
        if result.compatibility is avro.compatibility.SchemaCompatibilityType.compatible:
            return []
        return [f"{{errorType:'{kind.name.upper()}', description:'{message}', location:'{location}'}}"
                for kind, message, location in
                zip(result.incompatibilities, result.messages, result.locations, strict=False)] or ["incompatible"]


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # a bare primitive name such as string is a schema too


def _load(text: str, names: avro.name.Names) -> avro.schema.Schema:
    return avro.schema.make_avsc_object(_json(text), names)


def _add_dependencies(dependencies: Sequence[Dependency], names: avro.name.Names, seen: set[str]) -> None:
    for dep in dependencies:
        if dep.name in seen:
            continue
        seen.add(dep.name)
        _add_dependencies(dep.dependencies, names, seen)
        _load(dep.schema, names)


def parse(text: str, dependencies: Sequence[Dependency]) -> AvroSchema:
    names = avro.name.Names()
    try:
        _add_dependencies(dependencies, names, set())
        return AvroSchema(_load(text, names), _json(text))
    except (avro.errors.AvroException, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise errors.invalid_schema(f"{text[:200]}, details: {exc}") from exc
