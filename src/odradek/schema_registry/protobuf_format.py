"""Protobuf schemas: a ``.proto`` file compiled by protoc (grpcio-tools' bundled compiler, with the well-known
types on its import path), or a base64 ``FileDescriptorProto`` as confluent-kafka-python's serializer sends it.
Compatibility is wire compatibility of messages and fields, as Confluent's Protobuf rules decide it.

The rules kept (reader against writer): the package may not change; a message the writer has may not be removed; a
field number kept must keep a wire-compatible type (the varint scalars with each other and with enums; the zigzag
ones; the 32-bit and the 64-bit fixed ones; string with bytes; message fields only with the same message type);
a field may not move between singular and repeated; and no required field may be added. Removing a field or
adding an optional one is compatible.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from odradek.schema_registry import errors
from odradek.schema_registry.parsed import Dependency, Parsed

_F = descriptor_pb2.FieldDescriptorProto
_WIRE_GROUPS = [
    {_F.TYPE_INT32, _F.TYPE_UINT32, _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_BOOL, _F.TYPE_ENUM},
    {_F.TYPE_SINT32, _F.TYPE_SINT64},
    {_F.TYPE_FIXED32, _F.TYPE_SFIXED32},
    {_F.TYPE_FIXED64, _F.TYPE_SFIXED64},
    {_F.TYPE_STRING, _F.TYPE_BYTES},
]
_protoc_lock = threading.Lock()  # protoc keeps process-wide state; one compilation at a time


class ProtobufSchema:
    def __init__(self, text: str, file: descriptor_pb2.FileDescriptorProto) -> None:
        self.text = text
        self.file = file

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> str:
        return self.serialized()

    def serialized(self) -> str:
        """The file's descriptor in base64: what ``?format=serialized`` answers."""
        return base64.standard_b64encode(self.file.SerializeToString(deterministic=True)).decode("ascii")

    def incompatibilities(self, writer: Parsed) -> list[str]:
        assert isinstance(writer, ProtobufSchema)
        out: list[str] = []
        if self.file.package != writer.file.package:
            out.append(f"{{errorType:'PACKAGE_CHANGED', description:'{writer.file.package} to {self.file.package}'}}")
        ours = dict(_messages(self.file.message_type, self.file.package))
        for name, w_msg in _messages(writer.file.message_type, writer.file.package):
            r_msg = ours.get(name)
            if r_msg is None:
                out.append(f"{{errorType:'MESSAGE_REMOVED', description:'{name}'}}")
                continue
            r_fields = {f.number: f for f in r_msg.field}
            w_fields = {f.number: f for f in w_msg.field}
            for number, w in w_fields.items():
                r = r_fields.get(number)
                if r is not None and (problem := _field_change(r, w)):
                    out.append(f"{{errorType:'{problem}', description:'{name}.{r.name} (#{number})'}}")
            for number, r in r_fields.items():
                if number not in w_fields and r.label == _F.LABEL_REQUIRED:
                    out.append(f"{{errorType:'REQUIRED_FIELD_ADDED', description:'{name}.{r.name} (#{number})'}}")
        return out


def _messages(messages: Sequence[descriptor_pb2.DescriptorProto],
              prefix: str) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
    for msg in messages:
        name = f"{prefix}.{msg.name}" if prefix else msg.name
        yield name, msg
        yield from _messages(msg.nested_type, name)


def _field_change(reader: descriptor_pb2.FieldDescriptorProto, writer: descriptor_pb2.FieldDescriptorProto) -> str:
    if (reader.label == _F.LABEL_REPEATED) != (writer.label == _F.LABEL_REPEATED):
        return "FIELD_KIND_CHANGED"
    if reader.type == writer.type:
        if reader.type in (_F.TYPE_MESSAGE, _F.TYPE_GROUP) and reader.type_name != writer.type_name:
            return "FIELD_NAMED_TYPE_CHANGED"
        return ""
    if any(reader.type in g and writer.type in g for g in _WIRE_GROUPS):
        return ""
    return "FIELD_SCALAR_KIND_CHANGED"


def _from_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    file = descriptor_pb2.FileDescriptorProto()
    try:
        file.ParseFromString(raw)
    except DecodeError:
        return None
    return file if file.name or file.message_type else None


def _write_dependencies(root: Path, dependencies: Sequence[Dependency]) -> None:
    for dep in dependencies:
        _write_dependencies(root, dep.dependencies)
        path = root / dep.name
        if not path.resolve().is_relative_to(root.resolve()):
            raise errors.invalid_schema(f"reference name {dep.name!r} leaves the import path")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dep.schema)


def _compile(text: str, dependencies: Sequence[Dependency]) -> descriptor_pb2.FileDescriptorProto:
    import grpc_tools
    from grpc_tools import protoc

    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="odradek-proto-") as tmp:
        root = Path(tmp) / "src"
        root.mkdir()
        _write_dependencies(root, dependencies)
        main = root / "__schema__.proto"
        main.write_text(text)
        out = Path(tmp) / "set.pb"
        with _protoc_lock:
            code = protoc.main(["protoc", f"-I{root}", f"-I{well_known}", f"--descriptor_set_out={out}",
                                str(main)])
        if code != 0:
            raise errors.invalid_schema(f"{text[:200]}, details: protoc could not compile it")
        files = descriptor_pb2.FileDescriptorSet()
        files.ParseFromString(out.read_bytes())
    file = files.file[0]
    file.name = ""
    return file


def parse(text: str, dependencies: Sequence[Dependency]) -> ProtobufSchema:
    """A schema in either form; .proto text is compiled (blocking: callers run this off the event loop)."""
    file = _from_base64(text)
    if file is None:
        if any(_from_base64(d.schema) is not None for d in dependencies):
            raise errors.invalid_schema(f"{text[:200]}, details: a .proto text importing a serialized descriptor")
        file = _compile(text, dependencies)
    return ProtobufSchema(text, file)
