"""Confluent Schema Registry's error codes and messages, as its REST API answers them.

Every failure a request can meet is one :class:`RegistryError` carrying the HTTP status and Confluent's
``error_code``; the HTTP layer turns it into ``{"error_code": ..., "message": ...}``.
"""

from __future__ import annotations

SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_LEVEL_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
ID_DOES_NOT_MATCH = 42207
INVALID_SUBJECT = 42208
SCHEMA_TOO_LARGE = 42209
STORE_ERROR = 50001
OPERATION_TIMEOUT = 50002
REQUEST_FORWARDING_FAILED = 50003
UNKNOWN_LEADER = 50004

VALID_LEVELS_TEXT = ("Invalid compatibility level. Valid values are none, backward, forward, full, "
                     "backward_transitive, forward_transitive, and full_transitive")


class RegistryError(Exception):
    """One failed request: the HTTP status, Confluent's error code and its message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, VERSION_NOT_FOUND, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    text = "Schema not found" if schema_id is None else f"Schema {schema_id} not found"
    return RegistryError(404, SCHEMA_NOT_FOUND, text)


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, INVALID_SCHEMA, f"Invalid schema {detail}")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(422, INVALID_VERSION,
                         f"The specified version '{version}' is not a valid version id. Allowed values are between "
                         "[1, 2^31-1] and the string \"latest\"")


def invalid_level() -> RegistryError:
    return RegistryError(422, INVALID_COMPATIBILITY_LEVEL, VALID_LEVELS_TEXT)


def invalid_mode(mode: str) -> RegistryError:
    return RegistryError(422, INVALID_MODE,
                         f"Invalid mode {mode}. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT")


def not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, OPERATION_NOT_PERMITTED, detail)


def bad_request(detail: str) -> RegistryError:
    """A body that is not the JSON the endpoint reads (Confluent answers these with HTTP 400 and code 400)."""
    return RegistryError(400, 400, detail)
