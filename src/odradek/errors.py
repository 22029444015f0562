"""Kafka's error codes, shared by every layer that answers a client.

kio generates ``ErrorCode`` from Kafka's own ``Errors.java``, so the numbers and names are Kafka's; this module adds
the exception that carries one through our code so a handler can turn any failure into the right code.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["INVALID_REQUEST_MESSAGE", "RETRIABLE", "ErrorCode", "KafkaError"]


class KafkaError(Exception):
    """A failure that a client should see as a specific Kafka error code."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or the message was sent to an "
    "incompatible broker. See the broker logs for more details."
)
"""Kafka's ``Errors.INVALID_REQUEST.message()``: what its error responses say when the handler throws before
answering per resource (an unknown FindCoordinator key type, an unknown DescribeConfigs resource type)."""

RETRIABLE: frozenset[ErrorCode] = frozenset(
    code for code in ErrorCode if getattr(code, "retriable", False)
)
