"""The ``_schemas`` topic's keys and values, in the JSON Confluent's registry writes and reads.

Keys are ``{"keytype": ..., "subject": ..., "version": ..., "magic": ...}`` with Jackson's field order and
``NON_EMPTY`` inclusion (a global key has no ``subject``); SCHEMA keys carry magic 1, the others magic 0. A ``None``
value is a tombstone: a permanent delete, which compaction then removes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
NOOP = "NOOP"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
AVRO = "AVRO"


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaValue:
    """One subject version: its global id, format, references and schema text, and whether it is soft-deleted."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[Reference, ...] = field(default=())
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return out


@dataclass(frozen=True)
class Record:
    """A key and value to write: ``value`` None is a tombstone."""

    key: dict[str, Any]
    value: dict[str, Any] | None

    def encode(self) -> tuple[bytes, bytes | None]:
        key = json.dumps(self.key, separators=(",", ":")).encode()
        return key, None if self.value is None else json.dumps(self.value, separators=(",", ":")).encode()


def _key(keytype: str, subject: str | None, magic: int = 0, version: int | None = None) -> dict[str, Any]:
    key: dict[str, Any] = {"keytype": keytype}
    if subject:
        key["subject"] = subject
    if version is not None:
        key["version"] = version
    key["magic"] = magic
    return key


def schema_record(value: SchemaValue) -> Record:
    return Record(_key(SCHEMA, value.subject, 1, value.version), value.to_json())


def schema_tombstone(subject: str, version: int) -> Record:
    return Record(_key(SCHEMA, subject, 1, version), None)


def _setting(keytype: str, field: str, subject: str | None, setting: str | None) -> Record:
    """A CONFIG or MODE record: a subject's setting (the global one with subject None); None deletes it."""
    if setting is None:
        return Record(_key(keytype, subject), None)
    value: dict[str, Any] = {"subject": subject} if subject else {}
    value[field] = setting
    return Record(_key(keytype, subject), value)


def config_record(subject: str | None, level: str | None) -> Record:
    return _setting(CONFIG, "compatibilityLevel", subject, level)


def mode_record(subject: str | None, mode: str | None) -> Record:
    return _setting(MODE, "mode", subject, mode)


def delete_subject_record(subject: str, version: int) -> Record:
    """The soft delete of every version of ``subject`` up to ``version``."""
    return Record(_key(DELETE_SUBJECT, subject), {"subject": subject, "version": version})


def clear_subject_record(subject: str) -> Record:
    return Record(_key(CLEAR_SUBJECT, subject), {"subject": subject})


def noop_record() -> Record:
    """Written by a new primary and read back, so it knows it has read everything written before it."""
    return Record({"keytype": NOOP, "magic": 0}, None)


def decode_key(raw: bytes) -> dict[str, Any] | None:
    """A key as JSON, or None for one that is not a registry key (a foreign or corrupt record is skipped)."""
    try:
        key = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return key if isinstance(key, dict) and isinstance(key.get("keytype"), str) else None


def decode_value(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError("a value that is not a JSON object")
    return value


def schema_value_from_json(value: dict[str, Any]) -> SchemaValue:
    refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                 for r in value.get("references") or ())
    return SchemaValue(
        subject=str(value["subject"]), version=int(value["version"]), id=int(value["id"]),
        schema=str(value["schema"]), schema_type=str(value.get("schemaType") or AVRO), references=refs,
        deleted=bool(value.get("deleted", False)),
    )
