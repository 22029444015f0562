"""JSON Schema: checked against its draft's meta-schema by the ``jsonschema`` library; compatibility by
Confluent's JSON Schema rules, the ones that decide most registrations.

Data valid under the writer must be valid under the reader. The rules kept: types may widen, never narrow
(``integer`` reads as ``number``); a closed content model (``additionalProperties: false``) may not lose a property
and an open one may not be closed or gain a property; required properties may not be added; enums may not lose
values; bounds (``maximum``, ``minimum``, ``maxLength``, ``minLength``, ``maxItems``, ``minItems``) may not
tighten; and the same rules again inside ``properties``, ``items`` and ``additionalProperties``. Combinators
(``oneOf``, ``anyOf``, ``allOf``) are compared as equal or not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from odradek.schema_registry import errors
from odradek.schema_registry.parsed import Dependency, Parsed

_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")


class JsonSchema:
    def __init__(self, data: Any) -> None:
        self.data = data

    def canonical(self) -> str:
        return json.dumps(self.data, separators=(",", ":"))

    def normalized(self) -> str:
        return json.dumps(self.data, separators=(",", ":"), sort_keys=True)

    def incompatibilities(self, writer: Parsed) -> list[str]:
        assert isinstance(writer, JsonSchema)
        out: list[str] = []
        _compare(self.data, writer.data, "#", out)
        return out


def _types(schema: dict[str, Any]) -> set[str] | None:
    t = schema.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def _open(schema: dict[str, Any]) -> bool:
    return schema.get("additionalProperties", True) is not False


def _compare(reader: Any, writer: Any, path: str, out: list[str]) -> None:
    if reader is True or reader == {} or writer is False or reader == writer:
        return
    if reader is False or writer is True or not isinstance(reader, dict) or not isinstance(writer, dict):
        out.append(f"{{errorType:'SCHEMA_NARROWED', path:'{path}'}}")
        return
    r_types, w_types = _types(reader), _types(writer)
    if r_types is not None:
        widened = r_types | ({"integer"} if "number" in r_types else set())
        if w_types is None or not w_types <= widened:
            out.append(f"{{errorType:'TYPE_NARROWED', path:'{path}'}}")
            return
    for key in ("oneOf", "anyOf", "allOf", "not", "const", "$ref", "pattern", "format"):
        if reader.get(key) is not None and reader.get(key) != writer.get(key):
            out.append(f"{{errorType:'{key.upper()}_CHANGED', path:'{path}/{key}'}}")
    if "enum" in reader and not set(map(json.dumps, writer.get("enum", [None]))) <= set(map(json.dumps,
                                                                                           reader["enum"])):
        out.append(f"{{errorType:'ENUM_ARRAY_NARROWED', path:'{path}/enum'}}")
    for key in _UPPER:
        if key in reader and (key not in writer or writer[key] > reader[key]):
            out.append(f"{{errorType:'{key.upper()}_ADDED_OR_DECREASED', path:'{path}/{key}'}}")
    for key in _LOWER:
        if key in reader and (key not in writer or writer[key] < reader[key]):
            out.append(f"{{errorType:'{key.upper()}_ADDED_OR_INCREASED', path:'{path}/{key}'}}")
    _compare_object(reader, writer, path, out)
    if "items" in reader:
        _compare(reader["items"], writer.get("items", True), f"{path}/items", out)


def _compare_object(reader: dict[str, Any], writer: dict[str, Any], path: str, out: list[str]) -> None:
    r_props: dict[str, Any] = reader.get("properties") or {}
    w_props: dict[str, Any] = writer.get("properties") or {}
    if _open(writer) and not _open(reader):
        out.append(f"{{errorType:'ADDITIONAL_PROPERTIES_REMOVED', path:'{path}/additionalProperties'}}")
    for name, w_prop in w_props.items():
        if name in r_props:
            _compare(r_props[name], w_prop, f"{path}/properties/{name}", out)
        elif not _open(reader):
            out.append(f"{{errorType:'PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL', path:'{path}/properties/{name}'}}")
    for name in r_props:
        if name not in w_props and _open(writer) and isinstance(writer.get("additionalProperties"), dict):
            _compare(r_props[name], writer["additionalProperties"], f"{path}/properties/{name}", out)
        elif name not in w_props and _open(writer) and r_props[name] not in (True, {}):
            out.append(f"{{errorType:'PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL', path:'{path}/properties/{name}'}}")
    added = set(reader.get("required") or ()) - set(writer.get("required") or ())
    for name in sorted(added):
        out.append(f"{{errorType:'REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL', path:'{path}/required/{name}'}}")


def parse(text: str, dependencies: Sequence[Dependency]) -> JsonSchema:
    """A JSON Schema document checked against its ``$schema``'s meta-schema (draft 7 when it names none).

    References name other documents by ``$ref`` URL; they are resolved when data is validated, by the clients, so
    here they need only be registered."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise errors.invalid_schema(f"{text[:200]}, details: {exc}") from exc
    if not isinstance(data, (dict, bool)):
        raise errors.invalid_schema(f"{text[:200]}, details: a JSON Schema is an object or a boolean")
    cls = jsonschema.validators.validator_for(data, default=jsonschema.Draft7Validator)
    try:
        cls.check_schema(data)
    except jsonschema.exceptions.SchemaError as exc:
        raise errors.invalid_schema(f"{text[:200]}, details: {exc.message}") from exc
    return JsonSchema(data)
