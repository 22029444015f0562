"""A registry instance started whole on the caller's event loop: read ``_schemas`` to its end, serve HTTP, then
join the election under the URL it serves (known only once the port is bound)."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from odradek.schema_registry.basic_auth import ScramBasicAuth
from odradek.schema_registry.election import Election
from odradek.schema_registry.http_api import build_app
from odradek.schema_registry.service import Registry
from odradek.schema_registry.store import TOPIC

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024  # a request body beyond this gets HTTP 413


class SchemaRegistry:
    def __init__(self, bootstrap: str, *, host: str = "127.0.0.1", port: int = 0,
                 client_config: Mapping[str, Any] | None = None, topic: str = TOPIC,
                 max_body_bytes: int = MAX_BODY_BYTES, timeout_s: float = 30.0,
                 basic_auth: ScramBasicAuth | None = None, ssl_context: ssl.SSLContext | None = None) -> None:
        self.config = {**(client_config or {}), "bootstrap.servers": bootstrap}
        self.host = host
        self.port = port
        self.topic = topic
        self.max_body_bytes = max_body_bytes
        self.ssl_context = ssl_context  # HTTPS when set
        self.registry = Registry(self.config, self.url, topic, timeout_s)
        self.basic_auth = basic_auth
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"{'http' if self.ssl_context is None else 'https'}://{self.host}:{self.port}"

    @property
    def election(self) -> Election | None:
        return self.registry.election

    async def start(self) -> None:
        await self.registry.store.start()
        self._runner = web.AppRunner(build_app(self.registry, self.max_body_bytes, self.basic_auth), access_log=None,
                                     handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True, ssl_context=self.ssl_context)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        self.registry.url = self.url
        election = Election(self.config, self.topic, self.url)
        election.start()
        self.registry.election = election
        log.info("schema registry serving %s on topic %s", self.url, self.topic)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self.registry.election is not None:
            await self.registry.election.stop()
        await self.registry.store.stop()
