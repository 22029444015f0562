"""A small blocking Kafka client over kio, for the CLI and for tests that need exact control of requests.

It speaks one request at a time on one connection and picks the highest version both sides support, the same
negotiation real clients do, so ``odradek topics`` works against any Kafka-compatible broker. Framing is
:class:`odradek.protocol.client.BlockingConnection`'s, as for every other odradek client.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol.client import BlockingConnection
from odradek.protocol.entities import decode_entity, encode_entity, entity_schemas

API_VERSIONS = 18


class KafkaConnection:
    def __init__(self, bootstrap: str, client_id: str = "odradek-cli", timeout: float = 30.0) -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self._conn = BlockingConnection(host or "127.0.0.1", int(port), client_id, timeout=timeout)
        self.versions: dict[int, tuple[int, int]] = {}
        response = self.request(API_VERSIONS, entity_schemas(API_VERSIONS, 0).request(), version=0)
        self.versions = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}

    def close(self) -> None:
        self._conn.close()

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
        frame, offset = self.request_frame(api_key, body, version)
        return decode_entity(entity_schemas(api_key, version).response, frame, offset)

    def request_frame(self, api_key: int, body: Any, version: int) -> tuple[memoryview, int]:
        """Send ``body`` and return the undecoded response frame and where its body starts, for the responses
        kio's readers refuse although Kafka sends them (a -1 timestamp, say)."""
        schemas = entity_schemas(api_key, version)
        return self._conn.request(api_key, version, encode_entity(body), flexible_request=schemas.flexible_request,
                                  flexible_response=schemas.flexible_response)
