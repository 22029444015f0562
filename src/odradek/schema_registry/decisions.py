"""What each write decides, from the replayed state alone: the records to write and the answer to give.

Nothing here changes the state: the primary writes the records, reads them back, and only the replay
(``RegistryState.apply``) changes what every instance sees. A write that fails leaves the state as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from odradek.schema_registry import errors, formats, records
from odradek.schema_registry.parsed import Dependency, Parsed
from odradek.schema_registry.records import Record, Reference, SchemaValue
from odradek.schema_registry.state import Content, RegistryState

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1


@dataclass(frozen=True)
class Decision:
    records: list[Record]
    response: Any


@dataclass(frozen=True)
class Candidate:
    """A schema in a request: its format, text as given, references, and what its format made of it."""

    schema_type: str
    references: tuple[Reference, ...]
    parsed: Parsed


def schema_json(sv: SchemaValue, with_subject: bool = True) -> dict[str, Any]:
    """A subject version as the REST API shows it (``schemaType`` only when not AVRO, as Confluent)."""
    out: dict[str, Any] = {"subject": sv.subject, "version": sv.version, "id": sv.id} if with_subject else {}
    if sv.schema_type != records.AVRO:
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = [r.to_json() for r in sv.references]
    out["schema"] = sv.schema
    return out


def resolve(state: RegistryState, refs: Sequence[Reference]) -> list[Dependency]:
    """References as their schemas (and theirs, recursively); a reference to nothing is an invalid schema."""
    out = []
    for ref in refs:
        sv = state.versions.get(ref.subject, {}).get(ref.version)
        if sv is None:
            raise errors.invalid_schema(f"reference {ref.name} to subject {ref.subject} version {ref.version} "
                                        "that does not exist")
        out.append(Dependency(ref.name, sv.schema, tuple(resolve(state, sv.references))))
    return out


def parse_version(text: str) -> int:
    """A version in a path: ``latest``/``-1`` are -1, else 1..2^31-1 (Confluent's 42202 otherwise)."""
    if text == "latest":
        return -1
    try:
        version = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if version == -1:
        return -1
    if not 1 <= version <= MAX_VERSION:
        raise errors.invalid_version(text)
    return version


def find_version(state: RegistryState, subject: str, version: int, include_deleted: bool = False) -> SchemaValue:
    if subject not in state.versions or not state.live_versions(subject, include_deleted):
        raise errors.subject_not_found(subject)
    candidates = state.live_versions(subject, include_deleted)
    if version == -1:
        return candidates[-1]
    for sv in candidates:
        if sv.version == version:
            return sv
    raise errors.version_not_found(version)


def _writable(state: RegistryState, subject: str | None) -> None:
    mode = state.mode(subject)
    if mode in ("READONLY", "READONLY_OVERRIDE"):
        raise errors.not_permitted(f"Subject {subject} is in read-only mode" if subject else
                                   "The registry is in read-only mode")


def _matches(sv: SchemaValue, new: Candidate, old: Parsed | None, normalize: bool) -> bool:
    if sv.schema_type != new.schema_type or sv.references != new.references:
        return False
    if sv.schema == new.parsed.canonical():
        return True
    return normalize and old is not None and old.normalized() == new.parsed.normalized()


def lookup(state: RegistryState, subject: str, new: Candidate, parsed_versions: Mapping[int, Parsed],
           normalize: bool, include_deleted: bool) -> dict[str, Any]:
    """``POST /subjects/{subject}``: the version of ``subject`` that holds this schema."""
    versions = state.live_versions(subject, include_deleted)
    if not versions:
        raise errors.subject_not_found(subject)
    for sv in reversed(versions):
        if _matches(sv, new, parsed_versions.get(sv.version), normalize):
            return schema_json(sv)
    raise errors.schema_not_found()


def register(state: RegistryState, subject: str, new: Candidate, parsed_versions: Mapping[int, Parsed],
             normalize: bool, requested_id: int | None = None, requested_version: int | None = None) -> Decision:
    """``POST /subjects/{subject}/versions``: the same schema again is its id; a new one is checked against the
    subject's compatibility level and gets the next version, and the id its content already has or the next id."""
    _writable(state, subject)
    importing = state.mode(subject) == "IMPORT"
    if requested_id is not None and not importing:
        raise errors.not_permitted(f"Subject {subject} is not in import mode")
    live = state.live_versions(subject)
    for sv in reversed(live):
        if _matches(sv, new, parsed_versions.get(sv.version), normalize):
            return Decision([], {"id": sv.id})
    if not importing:
        previous = [parsed_versions[sv.version] for sv in live if sv.schema_type == new.schema_type]
        messages = formats.check(state.level(subject), new.parsed, previous)
        if messages or any(sv.schema_type != new.schema_type for sv in live[-1:]):
            detail = "; ".join(messages) or "a schema of another type"
            raise errors.RegistryError(
                409, errors.INCOMPATIBLE_SCHEMA,
                f"Schema being registered is incompatible with an earlier schema for subject \"{subject}\", "
                f"details: [{detail}]")
    content = Content(new.schema_type, new.parsed.canonical(), new.references)
    schema_id = state.ids_by_content.get(content)
    if requested_id is not None:
        if requested_id in state.contents and state.contents[requested_id] != content:
            raise errors.RegistryError(422, errors.ID_DOES_NOT_MATCH,
                                       f"Overwrite new schema with id {requested_id} is not permitted.")
        schema_id = requested_id
    elif schema_id is None:
        schema_id = state.max_id + 1
    every = state.versions.get(subject, {})
    version = requested_version or (max(every) + 1 if every else 1)
    if version in every:
        raise errors.not_permitted(f"Version {version} already exists for subject {subject}")
    value = SchemaValue(subject, version, schema_id, content.schema, new.schema_type, new.references)
    return Decision([records.schema_record(value)], {"id": schema_id})


def delete_version(state: RegistryState, subject: str, version: int, permanent: bool) -> Decision:
    _writable(state, subject)
    sv = find_version(state, subject, version, include_deleted=version != -1)  # latest: the latest live one
    if not sv.deleted:
        if permanent:
            raise errors.RegistryError(404, errors.VERSION_NOT_SOFT_DELETED,
                                       f"Subject '{subject}' Version {sv.version} was not deleted first before "
                                       "being permanently deleted")
        if state.referenced_by(subject, sv.version):
            raise errors.RegistryError(422, errors.REFERENCE_EXISTS,
                                       f"One or more references exist to the schema {{subject={subject}, "
                                       f"version={sv.version}}}.")
        return Decision([records.schema_record(replace(sv, deleted=True))], sv.version)
    if not permanent:
        raise errors.RegistryError(404, errors.VERSION_SOFT_DELETED,
                                   f"Subject '{subject}' Version {sv.version} was soft deleted. Set permanent=true "
                                   "to delete permanently")
    return Decision([records.schema_tombstone(subject, sv.version)], sv.version)


def delete_subject(state: RegistryState, subject: str, permanent: bool) -> Decision:
    _writable(state, subject)
    every = state.live_versions(subject, include_deleted=True)
    live = [sv for sv in every if not sv.deleted]
    if not every:
        raise errors.subject_not_found(subject)
    if not permanent:
        if not live:
            raise errors.RegistryError(404, errors.SUBJECT_SOFT_DELETED,
                                       f"Subject '{subject}' was soft deleted. Set permanent=true to delete "
                                       "permanently")
        for sv in live:
            if state.referenced_by(subject, sv.version):
                raise errors.RegistryError(422, errors.REFERENCE_EXISTS,
                                           f"One or more references exist to the schema {{subject={subject}, "
                                           f"version={sv.version}}}.")
        return Decision([records.delete_subject_record(subject, live[-1].version)], [sv.version for sv in live])
    if live:
        raise errors.RegistryError(404, errors.SUBJECT_NOT_SOFT_DELETED,
                                   f"Subject '{subject}' was not deleted first before being permanently deleted")
    out = [records.schema_tombstone(subject, sv.version) for sv in every]
    if subject in state.levels:
        out.append(records.config_record(subject, None))
    if subject in state.modes:
        out.append(records.mode_record(subject, None))
    return Decision(out, [sv.version for sv in every])


def set_level(state: RegistryState, subject: str | None, body: Mapping[str, Any]) -> Decision:
    level = body.get("compatibility", body.get("compatibilityLevel"))
    if not isinstance(level, str) or level.upper() not in formats.LEVELS:
        raise errors.invalid_level()
    _writable(state, subject)
    return Decision([records.config_record(subject, level.upper())], {"compatibility": level.upper()})


def delete_level(state: RegistryState, subject: str | None) -> Decision:
    if subject is not None and subject not in state.versions:
        raise errors.subject_not_found(subject)
    _writable(state, subject)
    return Decision([records.config_record(subject, None)], {"compatibilityLevel": state.level(subject)})


def set_mode(state: RegistryState, subject: str | None, body: Mapping[str, Any], force: bool) -> Decision:
    mode = body.get("mode")
    if not isinstance(mode, str) or mode.upper() not in MODES:
        raise errors.invalid_mode(str(mode))
    mode = mode.upper()
    if mode == "IMPORT" and not force and state.mode(subject) != "IMPORT":
        existing = state.subjects(include_deleted=True) if subject is None else (
            [subject] if subject in state.versions else [])
        if existing:
            raise errors.not_permitted("Cannot import since found existing subjects")
    return Decision([records.mode_record(subject, mode)], {"mode": mode})


def delete_mode(state: RegistryState, subject: str) -> Decision:
    if subject not in state.modes:
        raise errors.RegistryError(404, errors.SUBJECT_LEVEL_MODE_NOT_CONFIGURED,
                                   f"Subject '{subject}' does not have subject-level mode configured")
    return Decision([records.mode_record(subject, None)], {"mode": state.mode(subject)})
