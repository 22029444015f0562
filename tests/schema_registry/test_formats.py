"""Each format by its own rules: parsing (42201 for what its library refuses) and compatibility per level."""

from __future__ import annotations

import pytest

from odradek.schema_registry import errors, formats

RECORD = '{"type":"record","name":"R","fields":[%s]}'
NAME = '{"name":"name","type":"string"}'
AGE_DEFAULT = '{"name":"age","type":"int","default":0}'
AGE = '{"name":"age","type":"int"}'


def _avro(fields: str) -> formats.Parsed:
    return formats.parse("AVRO", RECORD % fields, [])


@pytest.mark.parametrize(("level", "old", "new", "compatible"), [
    ("BACKWARD", NAME, f"{NAME},{AGE_DEFAULT}", True),
    ("BACKWARD", NAME, f"{NAME},{AGE}", False),          # the new reader has no default for old data
    ("FORWARD", NAME, f"{NAME},{AGE}", True),            # old readers ignore the new field
    ("FORWARD", f"{NAME},{AGE}", NAME, False),           # old readers need age, new writers drop it
    ("FULL", NAME, f"{NAME},{AGE_DEFAULT}", True),
    ("FULL", NAME, f"{NAME},{AGE}", False),
    ("NONE", NAME, '{"name":"name","type":"int"}', True),
    ("BACKWARD", NAME, '{"name":"name","type":"int"}', False),
])
def test_avro_levels(level: str, old: str, new: str, compatible: bool) -> None:
    assert (formats.check(level, _avro(new), [_avro(old)]) == []) is compatible


def test_transitive_levels_check_every_version_and_plain_ones_the_latest() -> None:
    v1, v2, v3 = _avro(f"{NAME},{AGE}"), _avro(NAME), _avro(f"{NAME},{AGE_DEFAULT}")
    assert formats.check("FORWARD", v3, [v1, v2]) == []
    assert formats.check("FORWARD_TRANSITIVE", v2, [v1]) != []
    assert formats.check("BACKWARD_TRANSITIVE", _avro(f"{NAME},{AGE}"), [v2, v3]) != []


@pytest.mark.parametrize(("schema_type", "text"), [
    ("AVRO", '{"type":"record","name":"R","fields":[{"name":"a","type":"strin"}]}'),
    ("AVRO", "{not json"),
    ("JSON", '{"type":"objekt"}'),
    ("JSON", "[1, 2]"),
    ("PROTOBUF", 'syntax = "proto3"; message M { int32 a = 1 }'),
    ("PROTOBUF", 'syntax = "proto3"; import "missing.proto"; message M { Missing a = 1; }'),
])
def test_invalid_schemas_get_42201(schema_type: str, text: str) -> None:
    with pytest.raises(errors.RegistryError) as info:
        formats.parse(schema_type, text, [])
    assert (info.value.status, info.value.code) == (422, 42201)


def _json(text: str) -> formats.Parsed:
    return formats.parse("JSON", text, [])


@pytest.mark.parametrize(("old", "new", "compatible"), [
    ('{"type":"integer"}', '{"type":"number"}', True),   # widened
    ('{"type":"number"}', '{"type":"integer"}', False),  # narrowed
    ('{"type":"object","properties":{"a":{"type":"string"}}}',
     '{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}', False),
    ('{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}',
     '{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":false}',
     True),
    ('{"type":"object","properties":{"a":{"type":"string"}}}',
     '{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}', False),
    ('{"enum":["a","b"]}', '{"enum":["a","b","c"]}', True),
    ('{"enum":["a","b"]}', '{"enum":["a"]}', False),
    ('{"type":"string","maxLength":5}', '{"type":"string","maxLength":3}', False),
])
def test_json_schema_backward(old: str, new: str, compatible: bool) -> None:
    assert (formats.check("BACKWARD", _json(new), [_json(old)]) == []) is compatible


def _proto(body: str, package: str = "p") -> formats.Parsed:
    return formats.parse("PROTOBUF", f'syntax = "proto3"; package {package}; {body}', [])


@pytest.mark.parametrize(("old", "new", "compatible"), [
    ("message M { int32 a = 1; }", "message M { int32 a = 1; string b = 2; }", True),
    ("message M { int32 a = 1; string b = 2; }", "message M { int32 a = 1; }", True),
    ("message M { int32 a = 1; }", "message M { int64 a = 1; }", True),     # both varints
    ("message M { int32 a = 1; }", "message M { string a = 1; }", False),
    ("message M { string a = 1; }", "message M { bytes a = 1; }", True),
    ("message M { int32 a = 1; }", "message M { repeated int32 a = 1; }", False),
    ("message M { int32 a = 1; } message N { int32 b = 1; }", "message M { int32 a = 1; }", False),
    ("message M { N n = 1; } message N {} message O {}", "message M { O n = 1; } message N {} message O {}", False),
])
def test_protobuf_backward(old: str, new: str, compatible: bool) -> None:
    assert (formats.check("BACKWARD", _proto(new), [_proto(old)]) == []) is compatible


def test_protobuf_package_change_is_incompatible_and_descriptors_equal_text() -> None:
    text = _proto("message M { int32 a = 1; }")
    assert formats.check("BACKWARD", _proto("message M { int32 a = 1; }", "q"), [text]) != []
    serialized = text.serialized()  # type: ignore[attr-defined]
    again = formats.parse("PROTOBUF", serialized, [])
    assert again.normalized() == text.normalized()
    assert formats.check("FULL", again, [text]) == []


def test_protobuf_imports_resolve_through_references_and_the_well_known_types() -> None:
    dependency = formats.Dependency("common/ids.proto", 'syntax = "proto3"; package c; message Id { string v = 1; }')
    parsed = formats.parse("PROTOBUF", 'syntax = "proto3"; import "common/ids.proto"; '
                           'import "google/protobuf/timestamp.proto"; '
                           "message M { c.Id id = 1; google.protobuf.Timestamp at = 2; }", [dependency])
    assert list(parsed.file.dependency) == ["common/ids.proto", "google/protobuf/timestamp.proto"]  # type: ignore[attr-defined]
