"""The cluster picture the web console shows, from whichever broker serves the page.

Each broker knows part of the cluster: its metadata cache has every topic's partitions, leaders and ISRs (the
controller keeps it current); the groups it coordinates and their committed offsets are its own; the high
watermarks of the partitions it leads are its own; only the active controller holds reassignments in progress, and
each broker that was controller holds the state changes it made. So the serving broker asks every live peer for
its local part (``/api/local``, found through the ``http_port`` of its registration in the coordination store),
waits at most :data:`PEER_TIMEOUT_S` for each, and merges. A peer that does not answer is named in ``errors``;
the page still shows everything else.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from odradek.broker.faults import FaultState
from odradek.broker.group import GroupCoordinator
from odradek.broker.link.membership import Membership
from odradek.broker.metadata import MetadataCache
from odradek.broker.replica_manager import ReplicaManager
from odradek.controller import Controller
from odradek.coordination import CoordinationError, NoNodeError
from odradek.coordination import znodes as zn
from odradek.errors import KafkaError
from odradek.observe.view import groups_json, leader_high_watermarks, metadata_topics, reassignments_json

__all__ = ["PEER_TIMEOUT_S", "ConsoleParts", "cluster_view", "fetch_json", "local_view"]

log = logging.getLogger(__name__)

PEER_TIMEOUT_S = 2.0
TRANSITIONS_SHOWN = 300

PeerFetch = Callable[[str, int, str], Awaitable[Any]]


class ConsoleParts(Protocol):
    broker_id: int
    faults: FaultState
    host: str
    metrics_port: int | None
    metadata: MetadataCache
    membership: Membership
    replicas: ReplicaManager
    groups: GroupCoordinator
    controller: Controller
    schema_registry_view: Callable[[], dict[str, Any]] | None


def local_view(broker: ConsoleParts, internal: bool = False) -> dict[str, Any]:
    """What only this broker knows: its groups, its leaders' high watermarks, its controller's doings (those on
    internal topics only with ``internal``)."""
    controller = broker.controller
    return {
        "broker": broker.broker_id,
        "controller_active": controller.is_active,
        "controller_epoch": controller.epoch,
        "transitions": [t.to_json() for t in controller.transitions.recent(TRANSITIONS_SHOWN, internal)],
        "reassignments": reassignments_json(controller),
        "groups": groups_json(broker.groups, broker.broker_id),
        "high_watermarks": leader_high_watermarks(broker.replicas),
        "schema_registry": broker.schema_registry_view() if broker.schema_registry_view is not None else None,
    }


async def fetch_json(host: str, port: int, path: str) -> Any:
    """GET ``path`` from a peer's HTTP server (HTTP/1.0, the body read to the end)."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET {path} HTTP/1.0\r\nHost: {host}:{port}\r\nAccept: application/json\r\n\r\n".encode())
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split(b" ")
    if len(status) < 2 or status[1] != b"200":
        raise ConnectionError(f"{host}:{port}{path} answered {head[:60]!r}")
    return json.loads(body)


async def _peer_http_port(broker: ConsoleParts, broker_id: int) -> int:
    session = broker.membership.current()
    path = zn.broker_path(broker_id)
    data, _stat = await session.get(path)
    return zn.BrokerRegistration.from_json(data, path).http_port


async def _controller_epoch(broker: ConsoleParts) -> int | None:
    try:
        data, _stat = await broker.membership.current().get(zn.CONTROLLER_EPOCH)
    except NoNodeError:  # no controller elected yet
        return None
    except (KafkaError, CoordinationError):  # no session (restarting, re-registering after an expiry), or lost
        return None
    return zn.decode_controller_epoch(data)


async def cluster_view(broker: ConsoleParts, internal: bool = False, fetch: PeerFetch = fetch_json) -> dict[str, Any]:
    metadata = broker.metadata
    errors: list[str] = []
    locals_: dict[int, dict[str, Any]] = {broker.broker_id: local_view(broker, internal)}
    consoles: dict[int, str] = {}
    if broker.metrics_port is not None:
        consoles[broker.broker_id] = f"http://{broker.host}:{broker.metrics_port}/"

    async def ask(broker_id: int, host: str) -> None:
        port = await _peer_http_port(broker, broker_id)
        if port < 0:
            raise ConnectionError("serves no console (started without --metrics-port)")
        consoles[broker_id] = f"http://{host}:{port}/"
        locals_[broker_id] = await fetch(host, port, "/api/local?internal=1" if internal else "/api/local")

    peers = [b for b in metadata.brokers.values() if b.broker_id != broker.broker_id]
    outcomes = await asyncio.gather(
        *(asyncio.wait_for(ask(b.broker_id, b.host), PEER_TIMEOUT_S) for b in peers), return_exceptions=True)
    for peer, outcome in zip(peers, outcomes, strict=True):
        if isinstance(outcome, BaseException):
            errors.append(f"broker {peer.broker_id}: {type(outcome).__name__} {outcome}".strip())
    epoch = await _controller_epoch(broker)

    ends: dict[tuple[str, int], int] = {}
    for view in locals_.values():
        for topic, partition, hw in view.get("high_watermarks", []):
            ends[(topic, partition)] = hw
    topics = metadata_topics(metadata)
    live = set(metadata.brokers)
    known = set(live)
    for topic in topics:
        for p in topic["partitions"]:
            p["high_watermark"] = ends.get((topic["name"], p["partition"]))
            known.update(p["replicas"])
            if p["leader"] >= 0 and p["leader"] not in live:
                p["offline"] = True
    brokers = []
    for broker_id in sorted(known):
        endpoint = metadata.brokers.get(broker_id)
        brokers.append({
            "id": broker_id,
            "host": endpoint.host if endpoint else None,
            "port": endpoint.port if endpoint else None,
            "rack": endpoint.rack if endpoint else None,
            "alive": broker_id in live,
            "controller": broker_id == metadata.controller_id,
            "console": consoles.get(broker_id),
            "leaders": sum(1 for t in topics for p in t["partitions"] if p["leader"] == broker_id),
        })

    groups = []
    for view in locals_.values():
        for group in view.get("groups", []):
            offsets = []
            for topic, partition, committed in group.pop("offsets"):
                end = ends.get((topic, partition))
                offsets.append({"topic": topic, "partition": partition, "committed": committed, "end": end,
                                "lag": None if end is None else max(0, end - committed)})
            group["offsets"] = offsets
            group["lag"] = sum(o["lag"] or 0 for o in offsets)
            groups.append(group)
    groups.sort(key=lambda g: g["group"])

    transitions = sorted((t for view in locals_.values() for t in view.get("transitions", [])),
                         key=lambda t: (t["time_ms"], t["controller"], t["seq"]))[-TRANSITIONS_SHOWN:]
    active = [v for v in locals_.values() if v.get("controller_active")]
    active.sort(key=lambda v: v.get("controller_epoch", 0))
    return {
        "served_by": broker.broker_id,
        "cluster_id": metadata.cluster_id,
        "controller": {"id": metadata.controller_id, "epoch": epoch},
        "brokers": brokers,
        "topics": topics,
        "transitions": transitions,
        "groups": groups,
        "reassignments": active[-1]["reassignments"] if active else [],
        # the serving broker's registry first (its own view is the first asked), else any peer's
        "schema_registry": next((v["schema_registry"] for v in locals_.values() if v.get("schema_registry")), None),
        "errors": errors,
    }
