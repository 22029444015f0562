"""Kafka's error codes, shared by every layer that answers a client.

kio generates ``ErrorCode`` from Kafka's own ``Errors.java``, so the numbers and names are Kafka's; this module adds
the exception that carries one through our code so a handler can turn any failure into the right code.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["INVALID_REQUEST_MESSAGE", "NOT_CONTROLLER_MESSAGE", "RETRIABLE", "ErrorCode", "KafkaError",
           "RecordValidationError"]


class KafkaError(Exception):
    """A failure that a client should see as a specific Kafka error code."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


class RecordValidationError(KafkaError):
    """INVALID_RECORD for particular records of a batch, as Kafka's RecordValidationException: each error is the
    record's index in its batch and a message, and the whole message lists the first three as Java prints them."""

    def __init__(self, record_errors: list[tuple[int, str]]) -> None:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
        super().__init__(ErrorCode.invalid_record,
                         f"One or more records have been rejected due to {len(record_errors)} record errors in "
                         f"total, and only showing the first three errors at most: [{shown}]")
        self.record_errors = record_errors


INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or the message was sent to an "
    "incompatible broker. See the broker logs for more details."
)
"""Kafka's ``Errors.INVALID_REQUEST.message()``: what its error responses say when the handler throws before
answering per resource (an unknown FindCoordinator key type, an unknown DescribeConfigs resource type)."""

NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
"""Kafka's ``Errors.NOT_CONTROLLER.message()``: the top-level message of a ZooKeeper-mode broker that is not the
controller (partition reassignments)."""

RETRIABLE: frozenset[ErrorCode] = frozenset(
    code for code in ErrorCode if getattr(code, "retriable", False)
)
