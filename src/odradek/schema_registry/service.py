"""One registry instance's working parts behind its HTTP API: the replayed state, the topic it follows and writes,
schemas parsed by their formats, and the primary's one-at-a-time writes (``server`` starts it with HTTP and the
election)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from odradek.schema_registry import decisions, errors, formats, records
from odradek.schema_registry.decisions import Candidate, Decision
from odradek.schema_registry.election import Election
from odradek.schema_registry.parsed import Parsed
from odradek.schema_registry.records import Reference, SchemaValue
from odradek.schema_registry.state import Content, RegistryState
from odradek.schema_registry.store import TOPIC, KafkaStore

log = logging.getLogger(__name__)

class Registry:
    def __init__(self, config: Mapping[str, Any], url: str, topic: str = TOPIC, timeout_s: float = 30.0,
                 replication_factor: int = 3, brokers_wait_s: float = 0.0) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.state = RegistryState()
        self.store = KafkaStore(config, self.state.apply, topic, timeout_s, replication_factor, brokers_wait_s)
        self.election: Election | None = None  # joined once the HTTP server is up: the group knows us by URL
        self._parsed: dict[Content, Parsed] = {}
        self._write_lock = asyncio.Lock()
        self._synced_term = 0
        self.forward_ssl: ssl.SSLContext | None = None  # how forwarded writes reach an HTTPS primary
        self.unavailable: errors.RegistryError | None = None  # every request's answer while _schemas is refused

    # ---- schemas as their formats see them

    async def parse(self, schema_type: str, text: str, refs: Sequence[Reference]) -> Parsed:
        """Parse off the event loop (protoc compiles; Avro and JSON Schema parse in pure Python), remembered by
        content: a schema's text and references never change under its id."""
        content = Content(schema_type, text, tuple(refs))
        cached = self._parsed.get(content)
        if cached is None:
            dependencies = decisions.resolve(self.state, refs)
            cached = await asyncio.to_thread(formats.parse, schema_type, text, dependencies)
            self._parsed[content] = cached
        return cached

    async def candidate(self, body: Any) -> Candidate:
        """The schema a register, lookup or compatibility request carries."""
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise errors.bad_request("The request body must be a JSON object with a string field 'schema'")
        schema_type = body.get("schemaType") or records.AVRO
        if not isinstance(schema_type, str) or schema_type.upper() not in formats.TYPES:
            raise errors.invalid_schema(f"type {schema_type!r}: valid types are {', '.join(formats.TYPES)}")
        try:
            refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                         for r in body.get("references") or ())
        except (TypeError, KeyError, ValueError) as exc:
            raise errors.bad_request(f"Invalid references: {exc}") from exc
        parsed = await self.parse(schema_type.upper(), body["schema"], refs)
        return Candidate(schema_type.upper(), refs, parsed)

    async def parsed_versions(self, versions: Sequence[SchemaValue]) -> dict[int, Parsed]:
        return {sv.version: await self.parse(sv.schema_type, sv.schema, sv.references) for sv in versions}

    # ---- writes, on the primary

    async def write(self, decide: Callable[[], Any]) -> Any:
        """Run one write on the primary: one at a time, decided on the state as read back from the topic, the
        records written and read back before the answer. ``decide`` may await (parsing) and returns a Decision."""
        async with self._write_lock:
            term = self.election.term if self.election is not None else 0
            if self._synced_term != term:  # a new term: first read all that the previous primary wrote
                await self.store.write([records.noop_record()])
                self._synced_term = term
            decision: Decision = await decide()
            await self.store.write(decision.records)
            return decision.response
