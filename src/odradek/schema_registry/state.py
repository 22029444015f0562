"""The registry's state as replayed from ``_schemas``: the only place it changes is :meth:`RegistryState.apply`.

Every instance, primary or not, builds this from the records it reads, in topic order; a write becomes visible
here only once it has been read back from the topic, so all instances agree on ids and versions.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from odradek.schema_registry import records
from odradek.schema_registry.records import Reference, SchemaValue

log = logging.getLogger(__name__)

DEFAULT_LEVEL = "BACKWARD"
DEFAULT_MODE = "READWRITE"


@dataclass(frozen=True)
class Content:
    """What an id names: the format, the schema text and its references (the same under every subject)."""

    schema_type: str
    schema: str
    references: tuple[Reference, ...]


@dataclass
class RegistryState:
    versions: dict[str, dict[int, SchemaValue]] = field(default_factory=dict)
    contents: dict[int, Content] = field(default_factory=dict)
    ids_by_content: dict[Content, int] = field(default_factory=dict)
    levels: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0

    # ---- replay

    def apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        """Apply one record read from the topic; a record this registry does not know is skipped."""
        keytype = key.get("keytype")
        subject = key.get("subject") or None
        if keytype == records.SCHEMA and subject is not None and isinstance(key.get("version"), int):
            if value is None:
                self._remove(subject, int(key["version"]))
            else:
                self._put(records.schema_value_from_json(value))
        elif keytype == records.CONFIG:
            _set(self.levels, subject, value, "compatibilityLevel")
        elif keytype == records.MODE:
            _set(self.modes, subject, value, "mode")
        elif keytype == records.DELETE_SUBJECT and subject is not None and value is not None:
            watermark = int(value.get("version", 0))
            for version, sv in list(self.versions.get(subject, {}).items()):
                if version <= watermark and not sv.deleted:
                    self.versions[subject][version] = replace(sv, deleted=True)
        elif keytype == records.CLEAR_SUBJECT and subject is not None:
            for version, sv in list(self.versions.get(subject, {}).items()):
                if sv.deleted:
                    self._remove(subject, version)

    def _put(self, value: SchemaValue) -> None:
        content = Content(value.schema_type, value.schema, value.references)
        self.versions.setdefault(value.subject, {})[value.version] = value
        self.contents.setdefault(value.id, content)
        self.ids_by_content.setdefault(content, value.id)
        self.max_id = max(self.max_id, value.id)

    def _remove(self, subject: str, version: int) -> None:
        per_subject = self.versions.get(subject, {})
        gone = per_subject.pop(version, None)
        if not per_subject:
            self.versions.pop(subject, None)
        if gone is not None and not self.subject_versions_of(gone.id, include_deleted=True):
            content = self.contents.pop(gone.id, None)
            if content is not None and self.ids_by_content.get(content) == gone.id:
                del self.ids_by_content[content]

    # ---- reads

    def subjects(self, include_deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(s for s, vs in self.versions.items()
                      if s.startswith(prefix) and any(include_deleted or not v.deleted for v in vs.values()))

    def live_versions(self, subject: str, include_deleted: bool = False) -> list[SchemaValue]:
        return [v for _, v in sorted(self.versions.get(subject, {}).items()) if include_deleted or not v.deleted]

    def subject_versions_of(self, schema_id: int, include_deleted: bool = False) -> list[tuple[str, int]]:
        return sorted((sv.subject, sv.version) for vs in self.versions.values() for sv in vs.values()
                      if sv.id == schema_id and (include_deleted or not sv.deleted))

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas whose references name this subject version."""
        return sorted({sv.id for vs in self.versions.values() for sv in vs.values() if not sv.deleted
                       and any(r.subject == subject and r.version == version for r in sv.references)})

    def latest_by_subject(self) -> list[dict[str, Any]]:
        """Each live subject's latest version, its id, format and compatibility level (what the console lists)."""
        out = []
        for subject in self.subjects():
            latest = self.live_versions(subject)[-1]
            out.append({"subject": subject, "version": latest.version, "id": latest.id, "type": latest.schema_type,
                        "compatibility": self.level(subject)})
        return out

    def level(self, subject: str | None) -> str:
        if subject is not None and subject in self.levels:
            return self.levels[subject]
        return self.levels.get(None, DEFAULT_LEVEL)

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, DEFAULT_MODE)


def _set(settings: dict[str | None, str], subject: str | None, value: dict[str, Any] | None, field: str) -> None:
    setting = None if value is None else value.get(field)
    if setting is None:
        settings.pop(subject, None)
    else:
        settings[subject] = str(setting)
