"""A registry instance started whole on the caller's event loop: read ``_schemas`` to its end, serve HTTP, then
join the election under the URL it serves (known only once the port is bound)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from odradek.schema_registry import errors
from odradek.schema_registry.basic_auth import ScramBasicAuth
from odradek.schema_registry.election import Election
from odradek.schema_registry.http_api import build_app
from odradek.schema_registry.service import Registry
from odradek.schema_registry.store import TOPIC, NotAuthorized

log = logging.getLogger(__name__)

RETRY_S = 2.0  # how often a registry refused _schemas asks for it again
MAX_BODY_BYTES = 16 * 1024 * 1024  # a request body beyond this gets HTTP 413


class SchemaRegistry:
    def __init__(self, bootstrap: str, *, host: str = "127.0.0.1", port: int = 0,
                 client_config: Mapping[str, Any] | None = None, topic: str = TOPIC,
                 max_body_bytes: int = MAX_BODY_BYTES, timeout_s: float = 30.0,
                 basic_auth: ScramBasicAuth | None = None, ssl_context: ssl.SSLContext | None = None,
                 replication_factor: int = 3, brokers_wait_s: float = 0.0) -> None:
        self.config = {**(client_config or {}), "bootstrap.servers": bootstrap}
        self.host = host
        self.port = port
        self.topic = topic
        self.max_body_bytes = max_body_bytes
        self.ssl_context = ssl_context  # HTTPS when set
        self.registry = Registry(self.config, self.url, topic, timeout_s, replication_factor, brokers_wait_s)
        self.basic_auth = basic_auth
        self._runner: web.AppRunner | None = None
        self._retry: asyncio.Task[None] | None = None  # reading _schemas again while the authorizer refuses it

    @property
    def url(self) -> str:
        return f"{'http' if self.ssl_context is None else 'https'}://{self.host}:{self.port}"

    def console_view(self) -> dict[str, Any]:
        """What the brokers' web console shows of this registry (plain data; the broker knows nothing more of it)."""
        state = self.registry.state
        unavailable = self.registry.unavailable
        return {"url": self.url, "compatibility": state.level(None), "subjects": state.latest_by_subject(),
                "error": None if unavailable is None else unavailable.message}

    @property
    def election(self) -> Election | None:
        return self.registry.election

    async def start(self) -> None:
        """Read ``_schemas``, serve HTTP, join the election. When the cluster's authorizer refuses the topic, HTTP
        is served anyway, every request answered with 50001 and the reason, and the topic asked for again every
        ``RETRY_S`` seconds until ACLs allow it."""
        try:
            await self.registry.store.start()
        except NotAuthorized as exc:
            log.error("schema registry: the cluster's authorizer refuses access to %s (it needs READ and WRITE on "
                      "%s, and CREATE to make it); answering 50001 and asking again every %.0f s", exc, self.topic,
                      RETRY_S)
            self.registry.unavailable = errors.RegistryError(
                500, errors.STORE_ERROR, f"Error while initializing the Kafka store: {exc}")
            self._retry = asyncio.create_task(self._start_store_when_allowed())
        self._runner = web.AppRunner(build_app(self.registry, self.max_body_bytes, self.basic_auth), access_log=None,
                                     handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True, ssl_context=self.ssl_context)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        self.registry.url = self.url
        if self._retry is None:
            self._elect()
        log.info("schema registry serving %s on topic %s", self.url, self.topic)

    def _elect(self) -> None:
        election = Election(self.config, self.topic, self.url)
        election.start()
        self.registry.election = election

    async def _start_store_when_allowed(self) -> None:
        while True:
            await asyncio.sleep(RETRY_S)
            try:
                await self.registry.store.start()
            except NotAuthorized:
                continue
            except Exception as exc:  # the cluster unreachable for a while: ask again, as for a refusal
                log.warning("schema registry: reading %s: %s", self.topic, exc or repr(exc))
                continue
            self.registry.unavailable = None
            self._elect()
            log.info("schema registry: %s is readable now; serving it", self.topic)
            return

    async def stop(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.registry.election is not None:
            await self.registry.election.stop()
        await self.registry.store.stop()
