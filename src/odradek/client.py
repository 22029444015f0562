"""A small blocking Kafka client over kio, for the CLI and for tests that need exact control of requests.

It speaks one request at a time on one connection and picks the highest version both sides support, the same
negotiation real clients do, so ``odradek topics`` works against any Kafka-compatible broker.
"""

from __future__ import annotations

import io
import itertools
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

_SIZE = struct.Struct(">i")


class KafkaConnection:
    def __init__(self, bootstrap: str, client_id: str = "odradek-cli", timeout: float = 30.0) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout)
        self.client_id = client_id
        self._correlation = itertools.count(1)
        self.versions: dict[int, tuple[int, int]] = {}
        response = self.request(18, self._api_versions_request(), version=0)
        self.versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}

    @staticmethod
    def _api_versions_request() -> Any:
        return load_request_schema(18, 0)()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def version_for(self, api_key: int, highest: int) -> int:
        low, high = self.versions.get(api_key, (0, -1))
        version = min(high, highest)
        if version < low:
            raise RuntimeError(f"broker does not support API {api_key} at a version this client knows")
        return version

    def request(self, api_key: int, body: Any, version: int | None = None) -> Any:
        """Send ``body`` (a kio request entity of the chosen version) and return the decoded response."""
        if version is None:
            version = int(type(body).__version__)
        schema = load_request_schema(api_key, version)
        header_cls = schema.__header_schema__
        correlation = next(self._correlation)
        buf = io.BytesIO()
        fields: dict[str, Any] = {
            "request_api_key": i16(api_key), "request_api_version": i16(version), "correlation_id": i32(correlation),
        }
        if "client_id" in header_cls.__dataclass_fields__:
            fields["client_id"] = self.client_id
        entity_writer(header_cls)(buf, header_cls(**fields))
        entity_writer(schema)(buf, body)
        payload = buf.getvalue()
        self.sock.sendall(_SIZE.pack(len(payload)) + payload)
        frame = self._read_frame()
        response_cls = load_response_schema(api_key, version)
        header, offset = entity_reader(response_cls.__header_schema__)(frame, 0)
        if header.correlation_id != correlation:
            raise RuntimeError(f"correlation id {header.correlation_id} != {correlation}")
        response, _ = entity_reader(response_cls)(frame, offset)
        return response

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(payload)

    def _read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._read_exactly(4))
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks += chunk
        return bytes(chunks)
