"""The embedded store, made to survive restarts: persistent znodes journaled to a directory.

``odradek up --brokers N`` keeps its topics, configs and partition states in the embedded store; without this a
restart would forget every topic while the logs stayed on disk. Every committed change to a persistent znode is
appended to ``journal`` (one JSON line: the node's data and stat, or its deletion) before the operation's watches
fire, so by the time anyone has seen a change it is written; ephemeral znodes and sessions are not kept, exactly as
a ZooKeeper restart expires every session. The journal is folded into ``snapshot`` when it grows past the snapshot's
size. Lines are written without fsync per change (a crash of the process loses nothing; a power cut may lose the
last changes); close() and every snapshot fsync.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from pathlib import Path
from typing import Any

from odradek.clock import Clock
from odradek.coordination.embedded import EmbeddedBackend, _Node
from odradek.coordination.store import EventType, parent_of

log = logging.getLogger(__name__)

SNAPSHOT = "snapshot"
JOURNAL = "journal"
MIN_COMPACT_BYTES = 1 << 20


def _node_doc(path: str, node: _Node) -> dict[str, Any]:
    return {
        "p": path, "d": base64.b64encode(node.data).decode(), "v": node.version, "cv": node.cversion,
        "cz": node.czxid, "mz": node.mzxid, "pz": node.pzxid, "ct": node.ctime, "mt": node.mtime,
    }


class DurableEmbeddedBackend(EmbeddedBackend):
    def __init__(self, directory: Path | str, clock: Clock | None = None) -> None:
        super().__init__(clock)
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._load()
        self._journal = open(self.directory / JOURNAL, "a", encoding="utf-8")  # noqa: SIM115 - lives with us

    # --- loading ---------------------------------------------------------------------------------------------

    def _load(self) -> None:
        docs: dict[str, dict[str, Any] | None] = {}
        snapshot = self.directory / SNAPSHOT
        if snapshot.exists():
            for doc in json.loads(snapshot.read_text())["nodes"]:
                docs[doc["p"]] = doc
        journal = self.directory / JOURNAL
        if journal.exists():
            with open(journal, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    try:
                        doc = json.loads(line)
                    except json.JSONDecodeError:
                        log.warning("coordination journal %s: dropping torn line %d", journal, number)
                        break
                    if "del" in doc:
                        docs[doc["del"]] = None
                    else:
                        docs[doc["p"]] = doc
        restored = 0
        for path in sorted((p for p, d in docs.items() if d is not None), key=lambda p: (p.count("/"), p)):
            doc = docs[path]
            assert doc is not None
            parent = self._nodes.get(parent_of(path))
            if parent is None:
                log.warning("coordination snapshot: %s has no parent; skipped", path)
                continue
            if path == "/":
                node = self._nodes["/"]
            else:
                node = _Node(base64.b64decode(doc["d"]), doc["cz"], doc["ct"], 0)
                self._nodes[path] = node
                if parent.children is None:
                    parent.children = {}
                parent.children[path.rsplit("/", 1)[1]] = None
                restored += 1
            node.version, node.cversion, node.mzxid, node.pzxid, node.mtime = (
                doc["v"], doc["cv"], doc["mz"], doc["pz"], doc["mt"]
            )
            self._zxid = max(self._zxid, doc["cz"], doc["mz"], doc["pz"])
        if restored:
            log.info("coordination store: restored %d znodes from %s", restored, self.directory)

    # --- writing ---------------------------------------------------------------------------------------------

    def _fire(self, events: list[tuple[EventType, str]]) -> None:
        lines = []
        for kind, path in events:
            if kind is EventType.DELETED:
                lines.append(json.dumps({"del": path}))
                continue
            node = self._nodes.get(path)
            if node is not None and node.owner == 0:
                lines.append(json.dumps(_node_doc(path, node)))
        if lines:
            self._journal.write("\n".join(lines) + "\n")
            self._journal.flush()
            if self._journal.tell() > max(MIN_COMPACT_BYTES, self._snapshot_size() * 2):
                self.compact()
        super()._fire(events)

    def _snapshot_size(self) -> int:
        try:
            return (self.directory / SNAPSHOT).stat().st_size
        except FileNotFoundError:
            return 0

    def compact(self) -> None:
        """Fold the journal into a fresh snapshot (written atomically), then start an empty journal."""
        nodes = [_node_doc(p, n) for p, n in self._nodes.items() if n.owner == 0]
        tmp = self.directory / (SNAPSHOT + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "nodes": nodes}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.directory / SNAPSHOT)
        self._journal.close()
        self._journal = open(self.directory / JOURNAL, "w", encoding="utf-8")  # noqa: SIM115
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    async def close(self) -> None:
        await super().close()
        if not self._journal.closed:
            self._journal.flush()
            os.fsync(self._journal.fileno())
            self._journal.close()
