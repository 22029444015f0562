"""Confluent Schema Registry's REST API on aiohttp, on the caller's event loop.

Answers are ``application/vnd.schemaregistry.v1+json``; bodies are read as JSON under any of the media types
Confluent's accepts. Every failure is ``{"error_code": ..., "message": ...}`` with Confluent's codes: a request
that fails in a way we did not foresee is logged once and answered 500/50001, never with a traceback. Writes on an
instance that is not the primary are forwarded to the primary and its answer relayed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from aiohttp import web

from odradek.schema_registry import decisions, errors, formats
from odradek.schema_registry.basic_auth import ScramBasicAuth, basic_credentials
from odradek.schema_registry.decisions import Decision
from odradek.schema_registry.service import Registry

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_BODIES = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                   "application/json", "application/octet-stream", "")
ACCEPTABLE = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json", "application/json",
              "application/*", "*/*")
FORWARDED = "X-Odradek-Forwarded"
APPLIED = "X-Odradek-Applied-Offset"  # the primary's answer to a forwarded write: where its write ended in _schemas
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def reply(body: Any, status: int = 200) -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=MEDIA_TYPE)


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    return default if value is None else value.strip().lower() == "true"


def _subject_setting(request: web.Request, configured: Mapping[str | None, str], code: int, what: str) -> str | None:
    """The subject a GET /config or /mode names (None for the global one); 404 with ``code`` where the subject has
    no setting of its own and ``defaultToGlobal`` is not asked for, as Confluent's registry answers."""
    subject = request.match_info.get("subject")
    if subject is not None and subject not in configured and not _flag(request, "defaultToGlobal"):
        raise errors.RegistryError(404, code, f"Subject '{subject}' does not have subject-level {what} configured")
    return subject


def authenticating(auth: ScramBasicAuth) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """Every request carries HTTP Basic credentials that log in to the cluster (401 otherwise, as Confluent's)."""
    @web.middleware
    async def basic_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        credentials = basic_credentials(request.headers.get("Authorization"))
        if credentials is None or not await auth.check(*credentials):
            answer = reply({"error_code": 401, "message": "Unauthorized"}, 401)
            answer.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
            return answer
        return await handler(request)

    return basic_auth


@web.middleware
async def confluent_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    accept = request.headers.get("Accept", "")
    if accept and not any(a.split(";")[0].strip() in ACCEPTABLE for a in accept.split(",")):
        return reply({"error_code": 406, "message": "HTTP 406 Not Acceptable"}, 406)
    try:
        return await handler(request)
    except errors.RegistryError as exc:
        return reply(exc.body(), exc.status)
    except web.HTTPRequestEntityTooLarge as exc:
        return reply({"error_code": 413, "message": f"Request body too large: {exc.text}"}, 413)
    except web.HTTPException as exc:
        return reply({"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status)
    except Exception:
        log.exception("schema registry: %s %s failed", request.method, request.path)
        return reply({"error_code": 50001, "message": "Internal Server Error"}, 500)


async def _body(request: web.Request) -> Any:
    ctype = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if ctype not in ACCEPTED_BODIES:
        raise errors.RegistryError(415, 415, "HTTP 415 Unsupported Media Type")
    raw = await request.read()
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise errors.bad_request(f"Unrecognized token in the request body: {exc}") from exc


class Api:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self.state = registry.state
        self._session: aiohttp.ClientSession | None = None

    # ---- forwarding

    async def _forward(self, request: web.Request, target: str) -> web.StreamResponse:
        if request.headers.get(FORWARDED):
            raise errors.RegistryError(500, errors.REQUEST_FORWARDING_FAILED,
                                       "Error while forwarding the request: this instance is not the primary")
        body = await request.read()
        if self._session is None:
            # the primary's certificate is one of ours: same settings, so forwarding trusts what clients trust
            connector = aiohttp.TCPConnector(ssl=self.registry.forward_ssl) if self.registry.forward_ssl else None
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.registry.timeout_s),
                                                  connector=connector)
        headers = {"Content-Type": request.headers.get("Content-Type", MEDIA_TYPE), FORWARDED: "1"}
        if "Authorization" in request.headers:  # the primary checks the same credentials
            headers["Authorization"] = request.headers["Authorization"]
        try:
            async with self._session.request(request.method, target + request.rel_url.path_qs, data=body,
                                             headers=headers) as resp:
                answer = web.Response(body=await resp.read(), status=resp.status, content_type=MEDIA_TYPE)
                applied = resp.headers.get(APPLIED, "")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise errors.RegistryError(500, errors.REQUEST_FORWARDING_FAILED,
                                       f"Error while forwarding the request to {target}: {exc}") from exc
        if applied.lstrip("-").isdigit():
            await self.registry.store.wait_for(int(applied))  # so a read here right after sees the write
        return answer

    async def _primary_url(self) -> str:
        election = self.registry.election
        assert election is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.registry.timeout_s
        while True:
            if election.refused is not None:
                raise errors.RegistryError(500, errors.UNKNOWN_LEADER,
                                           f"Unknown leader: the election group refused this instance: "
                                           f"{election.refused}")
            url = await election.primary_url()
            if url is not None:
                return url
            election.changed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise errors.RegistryError(500, errors.UNKNOWN_LEADER, "Unknown leader: no primary elected")
            try:
                await asyncio.wait_for(election.changed.wait(), min(remaining, 1.0))
            except TimeoutError:
                pass

    async def _write_now(self, request: web.Request, decide: Callable[[], Decision]) -> web.StreamResponse:
        """A write decided from the state alone (no parsing to wait for)."""
        async def deciding() -> Decision:
            return decide()

        return await self._write(request, deciding)

    async def _write(self, request: web.Request, decide: Callable[[], Awaitable[Decision]]) -> web.StreamResponse:
        """Decide and write here on the primary; elsewhere forward to it. The group may have assigned us the
        partition before our callback ran: then we wait for it rather than forward to ourselves."""
        election = self.registry.election
        if election is None:
            raise errors.RegistryError(500, errors.UNKNOWN_LEADER, "Unknown leader: the election has not started")
        if not election.is_primary:
            target = await self._primary_url()
            if target != self.registry.url:
                return await self._forward(request, target)
            try:
                await asyncio.wait_for(election.primary.wait(), self.registry.timeout_s)
            except TimeoutError:
                raise errors.RegistryError(500, errors.UNKNOWN_LEADER, "Unknown leader: no primary elected") from None
        answer = reply(await self.registry.write(decide))
        answer.headers[APPLIED] = str(self.registry.store.applied)
        return answer

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    # ---- reads

    async def root(self, request: web.Request) -> web.Response:
        return reply({})

    async def types(self, request: web.Request) -> web.Response:
        return reply(list(formats.TYPES))

    async def contexts(self, request: web.Request) -> web.Response:
        return reply(["."])

    def _schema_id(self, request: web.Request) -> int:
        try:
            return int(request.match_info["id"])
        except ValueError:
            raise errors.schema_not_found() from None

    async def schema_by_id(self, request: web.Request) -> web.Response:
        schema_id = self._schema_id(request)
        content = self.state.contents.get(schema_id)
        if content is None:
            raise errors.schema_not_found(schema_id)
        body: dict[str, Any] = {}
        if content.schema_type != "AVRO":
            body["schemaType"] = content.schema_type
        if content.references:
            body["references"] = [r.to_json() for r in content.references]
        text = content.schema
        if request.query.get("format") == "serialized" and content.schema_type == "PROTOBUF":
            parsed = await self.registry.parse(content.schema_type, content.schema, content.references)
            text = parsed.serialized()  # type: ignore[attr-defined]
        body["schema"] = text
        if request.path.endswith("/schema"):
            return web.Response(text=text, content_type=MEDIA_TYPE)
        return reply(body)

    async def subjects_by_id(self, request: web.Request) -> web.Response:
        schema_id = self._schema_id(request)
        pairs = self.state.subject_versions_of(schema_id, _flag(request, "deleted"))
        if not pairs:
            raise errors.schema_not_found(schema_id)
        return reply(sorted({s for s, _ in pairs}))

    async def versions_by_id(self, request: web.Request) -> web.Response:
        schema_id = self._schema_id(request)
        pairs = self.state.subject_versions_of(schema_id, _flag(request, "deleted"))
        if not pairs:
            raise errors.schema_not_found(schema_id)
        return reply([{"subject": s, "version": v} for s, v in pairs])

    async def schemas(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        deleted, latest = _flag(request, "deleted"), _flag(request, "latestOnly")
        out = []
        for subject in self.state.subjects(deleted, prefix):
            versions = self.state.live_versions(subject, deleted)
            out += [decisions.schema_json(sv) for sv in (versions[-1:] if latest else versions)]
        return reply(out)

    async def subjects(self, request: web.Request) -> web.Response:
        return reply(self.state.subjects(_flag(request, "deleted"), request.query.get("subjectPrefix", "")))

    async def versions(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        versions = self.state.live_versions(subject, _flag(request, "deleted"))
        if not versions:
            raise errors.subject_not_found(subject)
        return reply([sv.version for sv in versions])

    async def version(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        version = decisions.parse_version(request.match_info["version"])
        sv = decisions.find_version(self.state, subject, version, _flag(request, "deleted"))
        if request.path.endswith("/schema"):
            return web.Response(text=sv.schema, content_type=MEDIA_TYPE)
        return reply(decisions.schema_json(sv))

    async def referenced_by(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        version = decisions.parse_version(request.match_info["version"])
        sv = decisions.find_version(self.state, subject, version)
        return reply(self.state.referenced_by(subject, sv.version))

    async def lookup(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        include_deleted = _flag(request, "deleted")
        if not self.state.live_versions(subject, include_deleted):
            raise errors.subject_not_found(subject)
        new = await self.registry.candidate(await _body(request))
        versions = self.state.live_versions(subject, include_deleted)
        parsed = await self.registry.parsed_versions(versions)
        return reply(decisions.lookup(self.state, subject, new, parsed, _flag(request, "normalize"), include_deleted))

    async def compatibility(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        new = await self.registry.candidate(await _body(request))
        live = [sv for sv in self.state.live_versions(subject) if sv.schema_type == new.schema_type]
        raw_version = request.match_info.get("version")
        if raw_version is not None:
            version = decisions.parse_version(raw_version)
            if not self.state.live_versions(subject):
                if version == -1:
                    return reply({"is_compatible": True})
                raise errors.subject_not_found(subject)
            live = [decisions.find_version(self.state, subject, version)]
        parsed = await self.registry.parsed_versions(live)
        level = self.state.level(subject)
        if raw_version is not None and level.endswith("_TRANSITIVE"):
            level = level.removesuffix("_TRANSITIVE")
        messages = formats.check(level, new.parsed, [parsed[sv.version] for sv in live])
        body: dict[str, Any] = {"is_compatible": not messages}
        if _flag(request, "verbose"):
            body["messages"] = messages
        return reply(body)

    async def get_config(self, request: web.Request) -> web.Response:
        subject = _subject_setting(request, self.state.levels, errors.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                                   "compatibility")
        return reply({"compatibilityLevel": self.state.level(subject)})

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = _subject_setting(request, self.state.modes, errors.SUBJECT_LEVEL_MODE_NOT_CONFIGURED, "mode")
        return reply({"mode": self.state.mode(subject)})

    # ---- writes

    async def register(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        body = await _body(request)
        normalize = _flag(request, "normalize")

        async def decide() -> Decision:
            new = await self.registry.candidate(body)
            parsed = await self.registry.parsed_versions(self.state.live_versions(subject))
            requested_id, requested_version = body.get("id"), body.get("version")
            return decisions.register(self.state, subject, new, parsed, normalize,
                                      requested_id if isinstance(requested_id, int) and requested_id > 0 else None,
                                      requested_version if isinstance(requested_version, int)
                                      and requested_version > 0 else None)

        return await self._write(request, decide)

    async def delete_version(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        version = decisions.parse_version(request.match_info["version"])
        permanent = _flag(request, "permanent")
        return await self._write_now(request, lambda: decisions.delete_version(self.state, subject, version, permanent))

    async def delete_subject(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        permanent = _flag(request, "permanent")
        return await self._write_now(request, lambda: decisions.delete_subject(self.state, subject, permanent))

    async def put_config(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info.get("subject")
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.invalid_level()
        return await self._write_now(request, lambda: decisions.set_level(self.state, subject, body))

    async def delete_config(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info.get("subject")
        return await self._write_now(request, lambda: decisions.delete_level(self.state, subject))

    async def put_mode(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info.get("subject")
        body = await _body(request)
        if not isinstance(body, dict):
            raise errors.invalid_mode(str(body))
        force = _flag(request, "force")
        return await self._write_now(request, lambda: decisions.set_mode(self.state, subject, body, force))

    async def delete_mode(self, request: web.Request) -> web.StreamResponse:
        subject = request.match_info["subject"]
        return await self._write_now(request, lambda: decisions.delete_mode(self.state, subject))


def build_app(registry: Registry, max_body_bytes: int, auth: ScramBasicAuth | None = None) -> web.Application:
    api = Api(registry)
    @web.middleware
    async def store_readable(request: web.Request, handler: Handler) -> web.StreamResponse:
        if registry.unavailable is not None:  # the authorizer refuses us _schemas: nothing to answer from
            raise registry.unavailable
        return await handler(request)

    middlewares: list[Any] = [confluent_errors, store_readable]
    if auth is not None:
        middlewares.insert(0, authenticating(auth))
    app = web.Application(middlewares=middlewares, client_max_size=max_body_bytes)

    async def close_session(_: web.Application) -> None:
        await api.close()

    app.on_cleanup.append(close_session)
    r = app.router
    r.add_get("/", api.root)
    r.add_get("/schemas/types", api.types)
    r.add_get("/contexts", api.contexts)
    r.add_get("/schemas", api.schemas)
    r.add_get("/schemas/ids/{id}", api.schema_by_id)
    r.add_get("/schemas/ids/{id}/schema", api.schema_by_id)
    r.add_get("/schemas/ids/{id}/subjects", api.subjects_by_id)
    r.add_get("/schemas/ids/{id}/versions", api.versions_by_id)
    r.add_get("/subjects", api.subjects)
    r.add_post("/subjects/{subject}", api.lookup)
    r.add_delete("/subjects/{subject}", api.delete_subject)
    r.add_get("/subjects/{subject}/versions", api.versions)
    r.add_post("/subjects/{subject}/versions", api.register)
    r.add_get("/subjects/{subject}/versions/{version}", api.version)
    r.add_delete("/subjects/{subject}/versions/{version}", api.delete_version)
    r.add_get("/subjects/{subject}/versions/{version}/schema", api.version)
    r.add_get("/subjects/{subject}/versions/{version}/referencedby", api.referenced_by)
    r.add_post("/compatibility/subjects/{subject}/versions", api.compatibility)
    r.add_post("/compatibility/subjects/{subject}/versions/{version}", api.compatibility)
    for path in ("/config", "/config/{subject}"):
        r.add_get(path, api.get_config)
        r.add_put(path, api.put_config)
        r.add_delete(path, api.delete_config)
    for path in ("/mode", "/mode/{subject}"):
        r.add_get(path, api.get_mode)
        r.add_put(path, api.put_mode)
    r.add_delete("/mode/{subject}", api.delete_mode)
    return app
