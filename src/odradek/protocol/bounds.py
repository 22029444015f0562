"""Every length in a request body checked against the bytes that follow it, before kio decodes the body.

kio's native reader allocates an array's declared capacity before it reads a single element, and an allocation that
fails aborts the process: one frame saying "2,000,000,000 partitions follow" would take the whole broker down. Kafka's
generated readers refuse any collection larger than what remains of the message ("Tried to allocate a collection of
size N, but there are only M bytes remaining"); this module does the same walk ahead of kio, from the same schema
classes, and raises :class:`LengthError` instead. A length can never exceed the bytes after it: every element takes
at least one byte.

The walk is compiled once per schema class into a small plan (fixed-size fields become one skip) and touches no
payload bytes, so it costs a few microseconds for an ordinary request.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, is_optional

from odradek.protocol.wire import WireFormatError, read_uvarint

__all__ = ["LengthError", "check_lengths"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_FIXED = {"int8": 1, "bool": 1, "int16": 2, "error_code": 2, "uint16": 2, "int32": 4, "uint32": 4, "timedelta_i32": 4,
          "int64": 8, "timedelta_i64": 8, "datetime_i64": 8, "float64": 8, "uuid": 16}

Step = Callable[[bytes | bytearray | memoryview, int, int], int]
"""Validate one field starting at ``pos`` (the body ends at ``end``) and return where the next field starts."""


class LengthError(WireFormatError):
    """A length in the request body that the bytes after it cannot hold."""


def _uvarint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    try:
        value, after = read_uvarint(buf, pos)
    except WireFormatError as exc:
        raise LengthError(str(exc)) from None
    if after > end:
        raise LengthError("a varint runs past the end of its field")
    return value, after


def _need(pos: int, size: int, end: int, what: str) -> int:
    if size < 0 or pos + size > end:
        raise LengthError(f"{what} of {size} bytes, but only {end - pos} remain")
    return pos + size


def _length(flexible: bool, wide: bool) -> Callable[[bytes | bytearray | memoryview, int, int], tuple[int, int]]:
    """Reader of a length prefix: compact (uvarint, n + 1, 0 = null) when flexible, else int16 or int32 (-1 = null);
    null comes back as 0."""
    if flexible:
        def compact(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
            n, pos = _uvarint(buf, pos, end)
            return max(n - 1, 0), pos
        return compact
    size = _I32 if wide else _I16

    def fixed(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
        start = _need(pos, size.size, end, "a length prefix")
        (n,) = size.unpack_from(buf, pos)
        if n < -1:
            raise LengthError(f"length {n}")
        return max(n, 0), start
    return fixed


def _skip(size: int) -> Step:
    def step(buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
        return _need(pos, size, end, "a field")
    return step


def _sized(flexible: bool, wide: bool) -> Step:
    read = _length(flexible, wide)

    def step(buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
        n, pos = read(buf, pos, end)
        return _need(pos, n, end, "a string or bytes field")
    return step


def _array(flexible: bool, element: Step, min_size: int) -> Step:
    read = _length(flexible, wide=True)

    def step(buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
        n, pos = read(buf, pos, end)
        if n * min_size > end - pos:
            raise LengthError(f"an array of {n} elements, but only {end - pos} bytes remain")
        for _ in range(n):
            pos = element(buf, pos, end)
        return pos
    return step


def _fixed_array(flexible: bool, size: int) -> Step:
    read = _length(flexible, wide=True)

    def step(buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
        n, pos = read(buf, pos, end)
        # at least a byte each, as Kafka checks: an array of empty structs must not claim more than remains
        _need(pos, n, end, f"an array of {n} elements")
        return _need(pos, n * size, end, f"an array of {n} fixed-size elements")
    return step


def _nullable_struct(entity: Step) -> Step:
    """A nullable struct: one signed byte first, -1 for null (Kafka's generated code writes it so)."""
    def step(buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
        start = _need(pos, 1, end, "a struct's null marker")
        return start if buf[pos] == 0xFF else entity(buf, start, end)
    return step


def _field_step(field: dataclasses.Field[Any], flexible: bool) -> tuple[Step, int | None]:
    """The field's step, and its size when that is fixed (so runs of fixed fields fold into one skip)."""
    kind = field.metadata.get("kafka_type")
    shape = classify_field(field)
    if isinstance(shape, EntityTupleField):
        element, size = _plan(shape.type_)
        return (_fixed_array(flexible, size) if size is not None else _array(flexible, element, 1)), None
    if isinstance(shape, EntityField):
        element, size = _plan(shape.type_)
        return (_nullable_struct(element), None) if is_optional(field) else (element, size)
    if kind in _FIXED:
        if isinstance(shape, PrimitiveTupleField):
            return _fixed_array(flexible, _FIXED[kind]), None
        return _skip(_FIXED[kind]), _FIXED[kind]
    if kind in ("string", "bytes", "records"):
        element = _sized(flexible, wide=kind != "string")
        if isinstance(shape, PrimitiveTupleField):
            return _array(flexible, element, 1), None
        return element, None
    raise TypeError(f"no length rule for field {field.name} of kafka type {kind!r}")


_PLANS: dict[type[Any], tuple[Step, int | None]] = {}


def _plan(cls: type[Any]) -> tuple[Step, int | None]:
    """The entity's step, and its size when every field is fixed and it has no tagged fields (then an array of it
    is checked with one multiplication)."""
    found = _PLANS.get(cls)
    if found is not None:
        return found
    flexible = bool(getattr(cls, "__flexible__", False))
    positional: list[Step] = []
    tagged: dict[int, Step] = {}
    run = 0  # bytes of fixed-size fields not yet emitted as one skip
    total: int | None = 0
    for field in dataclasses.fields(cls):
        step, size = _field_step(field, flexible)
        if "tag" in field.metadata:
            tagged[int(field.metadata["tag"])] = step
            continue
        if size is not None:
            run += size
            total = None if total is None else total + size
            continue
        if run:
            positional.append(_skip(run))
            run = 0
        positional.append(step)
        total = None
    if run:
        positional.append(_skip(run))

    def entity(buf: bytes | bytearray | memoryview, pos: int, end: int) -> int:
        for step in positional:
            pos = step(buf, pos, end)
        if flexible:
            count, pos = _uvarint(buf, pos, end)
            if count > end - pos:
                raise LengthError(f"{count} tagged fields, but only {end - pos} bytes remain")
            for _ in range(count):
                tag, pos = _uvarint(buf, pos, end)
                size, pos = _uvarint(buf, pos, end)
                stop = _need(pos, size, end, f"tagged field {tag}")
                known = tagged.get(tag)
                if known is not None:
                    known(buf, pos, stop)
                pos = stop
        return pos

    plan = (entity, None if flexible else total)
    _PLANS[cls] = plan
    return plan


def check_lengths(schema: type[Any], frame: bytes | bytearray | memoryview, offset: int) -> int:
    """Walk the body of ``schema`` in ``frame`` from ``offset``; raise :class:`LengthError` at the first length the
    rest of the frame cannot hold. Returns where the body ends (trailing bytes are the caller's business)."""
    return _plan(schema)[0](frame, offset, len(frame))
