"""The ``_schemas`` records in Confluent's JSON, their replay, and the decisions that produce them (no I/O)."""

from __future__ import annotations

import json

import pytest

from odradek.schema_registry import decisions, errors, formats, records
from odradek.schema_registry.decisions import Candidate
from odradek.schema_registry.records import SchemaValue
from odradek.schema_registry.state import RegistryState

AVRO_V1 = '{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}'
AVRO_V2 = ('{"type":"record","name":"User","fields":[{"name":"name","type":"string"},'
           '{"name":"age","type":"int","default":0}]}')
AVRO_BREAKS = ('{"type":"record","name":"User","fields":[{"name":"name","type":"string"},'
               '{"name":"age","type":"int"}]}')


def _candidate(text: str, schema_type: str = "AVRO") -> Candidate:
    return Candidate(schema_type, (), formats.parse(schema_type, text, []))


def _replay(state: RegistryState, decision: decisions.Decision) -> None:
    """What the reader does with records read back: decode the bytes written, apply them."""
    for record in decision.records:
        key, value = record.encode()
        state.apply(json.loads(key), None if value is None else json.loads(value))


def _parsed(state: RegistryState, subject: str) -> dict[int, formats.Parsed]:
    return {sv.version: formats.parse(sv.schema_type, sv.schema, []) for sv in state.live_versions(subject)}


def _register(state: RegistryState, subject: str, text: str, schema_type: str = "AVRO") -> int:
    decision = decisions.register(state, subject, _candidate(text, schema_type), _parsed(state, subject), False)
    _replay(state, decision)
    return int(decision.response["id"])


def test_keys_and_values_are_confluents_json() -> None:
    value = SchemaValue("orders-value", 3, 7, AVRO_V1)
    key, raw = records.schema_record(value).encode()
    assert key == b'{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}'
    assert json.loads(raw or b"") == {"subject": "orders-value", "version": 3, "id": 7, "schema": AVRO_V1,
                                      "deleted": False}
    assert records.config_record(None, "FULL").encode() == (b'{"keytype":"CONFIG","magic":0}',
                                                             b'{"compatibilityLevel":"FULL"}')
    assert records.mode_record("s", "READONLY").encode() == (b'{"keytype":"MODE","subject":"s","magic":0}',
                                                             b'{"subject":"s","mode":"READONLY"}')
    assert records.delete_subject_record("s", 2).encode() == (b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}',
                                                              b'{"subject":"s","version":2}')
    proto = SchemaValue("p", 1, 2, "syntax = \"proto3\";", "PROTOBUF", (records.Reference("a.proto", "a", 1),))
    assert json.loads(records.schema_record(proto).encode()[1] or b"")["schemaType"] == "PROTOBUF"


def test_a_decision_changes_nothing_until_its_records_are_replayed() -> None:
    state = RegistryState()
    decision = decisions.register(state, "s", _candidate(AVRO_V1), {}, False)
    assert decision.response == {"id": 1} and state.versions == {}
    _replay(state, decision)
    assert [sv.version for sv in state.live_versions("s")] == [1]


def test_ids_are_global_and_shared_by_equal_schemas_versions_per_subject() -> None:
    state = RegistryState()
    assert _register(state, "a", AVRO_V1) == 1
    assert _register(state, "b", AVRO_V1) == 1  # the same schema under another subject keeps its id
    assert _register(state, "a", AVRO_V2) == 2
    assert _register(state, "a", AVRO_V1) == 1  # registered already: no new version
    assert [sv.version for sv in state.live_versions("a")] == [1, 2]
    assert state.subject_versions_of(1) == [("a", 1), ("b", 1)]


def test_backward_refuses_a_field_without_default_and_none_allows_it() -> None:
    state = RegistryState()
    _register(state, "s", AVRO_V1)
    with pytest.raises(errors.RegistryError) as info:
        _register(state, "s", AVRO_BREAKS)
    assert (info.value.status, info.value.code) == (409, 409)
    _replay(state, decisions.set_level(state, "s", {"compatibility": "NONE"}))
    assert _register(state, "s", AVRO_BREAKS) == 2


def test_soft_then_permanent_deletes_follow_confluents_order() -> None:
    state = RegistryState()
    _register(state, "s", AVRO_V1)
    with pytest.raises(errors.RegistryError) as info:
        decisions.delete_subject(state, "s", permanent=True)
    assert info.value.code == errors.SUBJECT_NOT_SOFT_DELETED
    soft = decisions.delete_subject(state, "s", permanent=False)
    assert soft.response == [1]
    _replay(state, soft)
    assert state.subjects() == [] and state.subjects(include_deleted=True) == ["s"]
    assert 1 in state.contents  # a soft-deleted schema keeps its id
    with pytest.raises(errors.RegistryError) as info:
        decisions.delete_subject(state, "s", permanent=False)
    assert info.value.code == errors.SUBJECT_SOFT_DELETED
    _replay(state, decisions.delete_subject(state, "s", permanent=True))
    assert state.subjects(include_deleted=True) == [] and 1 not in state.contents
    with pytest.raises(errors.RegistryError) as info:
        decisions.delete_subject(state, "s", permanent=False)
    assert info.value.code == errors.SUBJECT_NOT_FOUND
    assert _register(state, "s", AVRO_V2) == 2  # ids are never reused while the topic remembers the highest


@pytest.mark.parametrize(("text", "code"), [("latest", -1), ("-1", -1), ("1", 1), ("2147483647", 2**31 - 1)])
def test_versions_in_paths(text: str, code: int) -> None:
    assert decisions.parse_version(text) == code


@pytest.mark.parametrize("text", ["0", "a", "-2", "2147483648", ""])
def test_bad_versions_get_42202(text: str) -> None:
    with pytest.raises(errors.RegistryError) as info:
        decisions.parse_version(text)
    assert (info.value.status, info.value.code) == (422, 42202)


def test_read_only_mode_refuses_writes_and_bad_levels_and_modes_get_their_codes() -> None:
    state = RegistryState()
    _replay(state, decisions.set_mode(state, None, {"mode": "READONLY"}, force=False))
    with pytest.raises(errors.RegistryError) as info:
        _register(state, "s", AVRO_V1)
    assert info.value.code == errors.OPERATION_NOT_PERMITTED
    with pytest.raises(errors.RegistryError) as info:
        decisions.set_level(state, None, {"compatibility": "SIDEWAYS"})
    assert info.value.code == errors.INVALID_COMPATIBILITY_LEVEL
    with pytest.raises(errors.RegistryError) as info:
        decisions.set_mode(state, None, {"mode": "WRITEONLY"}, force=False)
    assert info.value.code == errors.INVALID_MODE


def test_a_referenced_version_cannot_be_deleted() -> None:
    state = RegistryState()
    _register(state, "user", AVRO_V1)
    outer = '{"type":"record","name":"Outer","fields":[{"name":"u","type":"User"}]}'
    refs = (records.Reference("User", "user", 1),)
    dependency = decisions.resolve(state, refs)
    candidate = Candidate("AVRO", refs, formats.parse("AVRO", outer, dependency))
    _replay(state, decisions.register(state, "outer", candidate, {}, False))
    assert state.referenced_by("user", 1) == [2]
    with pytest.raises(errors.RegistryError) as info:
        decisions.delete_version(state, "user", 1, permanent=False)
    assert info.value.code == errors.REFERENCE_EXISTS
