"""The lab: a ZooKeeper ensemble and ``odradek broker`` processes, each on its own host (network namespace).

:class:`Lab` is what tests, ``make lab`` and ``bench/nemesis.py`` start. It also answers the questions a nemesis
asks of a running cluster (who is controller, who leads a partition, who leads the ZooKeeper quorum, is every
replica back in its ISR) from ZooKeeper itself, through the host's veth: the partition state znodes hold the
leaders' ISR writes at once, where Metadata waits for the controller's batched ISR notifications.

Everything it creates is removed by :meth:`Lab.stop`, which also runs at interpreter exit; a run killed outright
leaves its namespaces behind, and the next lab to take the same slot removes them (see :mod:`odradek.lab.netns`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from odradek.admin import metadata
from odradek.client import KafkaConnection
from odradek.lab import firewall
from odradek.lab.netns import Host, Network, acquire_slot
from odradek.lab.processes import LabBroker, LabZooKeeper, wait_until

__all__ = ["DEFAULT_OVERRIDES", "Lab"]

CHROOT = "/odradek"

DEFAULT_OVERRIDES = {
    # Failures are noticed within seconds instead of Kafka's 18 s and 30 s, so a run can hold many faults.
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "group.initial.rebalance.delay.ms": "0",
    "leader.imbalance.check.interval.seconds": "300",
    "unclean.leader.election.enable": "false",
    "offsets.topic.replication.factor": "3",
    # Every workload's topic is created by the lab with its partitions and configs. A client of an earlier lab in
    # the same process (a transform worker abandoned while blocked in librdkafka) keeps reconnecting to the same
    # slot's addresses; with auto-creation its Metadata request created `txn-output` with one partition in the next
    # lab before the lab did, and that lab timed out waiting for three (issue 15, three of 40 runs under load).
    "auto.create.topics.enable": "false",
}

log = logging.getLogger(__name__)


class Lab:
    """Hosts ``zk1..zkN`` and ``b0..bM-1``; brokers reach the ensemble at its members' real addresses."""

    def __init__(self, brokers: int = 3, zookeepers: int = 3, base_dir: Path | None = None,
                 overrides: dict[str, str] | None = None) -> None:
        self.broker_count = brokers
        self.zookeeper_count = zookeepers
        self._own_dir = base_dir is None
        self.base_dir = base_dir or Path(tempfile.mkdtemp(prefix="odradek-lab-"))
        self.overrides = {**DEFAULT_OVERRIDES, **(overrides or {})}
        self.network: Network | None = None
        self.zookeepers: dict[int, LabZooKeeper] = {}
        self.brokers: dict[int, LabBroker] = {}
        self.blocked: dict[str, set[str]] = {}  # host name -> addresses its firewall drops
        self._slot_fd: int | None = None
        self._zk: KazooClient | None = None

    # ---- life cycle

    def start(self) -> Lab:
        atexit.register(self.stop)
        try:
            slot, self._slot_fd = acquire_slot()
            self.network = Network(slot)
            self.network.create()
            zk_hosts = {sid: self.network.add_host(f"zk{sid}") for sid in range(1, self.zookeeper_count + 1)}
            broker_hosts = {i: self.network.add_host(f"b{i}") for i in range(self.broker_count)}
            ensemble = {sid: h.address for sid, h in zk_hosts.items()}
            for sid, h in zk_hosts.items():
                self.zookeepers[sid] = LabZooKeeper(sid, h, self.base_dir, ensemble).start()
            wait_until(self.quorum_serving, 90, "the ZooKeeper ensemble to elect a leader and serve")
            connect = ",".join(z.connect for z in self.zookeepers.values()) + CHROOT
            for i, h in broker_hosts.items():
                self.brokers[i] = LabBroker(i, h, self.base_dir, connect, self.overrides)
            for b in self.brokers.values():
                b.spawn()
            for b in self.brokers.values():
                wait_until(b.ready, 90, f"{b.name} ready")
            wait_until(lambda: len(self.registered_brokers()) == self.broker_count and self.controller_id() is not None,
                       60, "every broker registered and a controller elected")
            # CreateTopics checks the replication factor against the answering broker's metadata, which the
            # controller's UpdateMetadata fills in a moment after the registrations
            wait_until(self.brokers_know_each_other, 60, "every broker's metadata naming every broker")
        except BaseException:
            self.stop()
            raise
        log.info("lab up in slot %d: %s", slot, self.describe())
        return self

    def stop(self) -> None:
        """Stop every process, remove every namespace and the host veth; safe to call twice."""
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
            self._zk = None
        for server in [*self.brokers.values(), *self.zookeepers.values()]:
            with contextlib.suppress(Exception):
                server.kill()
        if self.network is not None:
            self.network.destroy()
            self.network = None
        if self._slot_fd is not None:
            os.close(self._slot_fd)
            self._slot_fd = None
        if self._own_dir and not os.environ.get("ODRADEK_LAB_KEEP"):
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Lab:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def describe(self) -> str:
        parts = [f"zk{sid}={z.host.address}" for sid, z in self.zookeepers.items()]
        parts += [f"broker{i}={b.address}" for i, b in self.brokers.items()]
        return " ".join(parts)

    # ---- addresses

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    @property
    def zk_connect(self) -> str:
        return ",".join(z.connect for z in self.zookeepers.values())

    def host(self, name: str) -> Host:
        assert self.network is not None
        return self.network.hosts[name]

    def broker_host(self, broker_id: int) -> Host:
        return self.brokers[broker_id].host

    # ---- partitions (firewall)

    def block(self, host: Host, addresses: set[str]) -> None:
        """Add ``addresses`` to what ``host`` drops, both directions."""
        current = self.blocked.setdefault(host.name, set())
        current |= addresses
        firewall.apply(host, current)

    def unblock(self, host: Host, addresses: set[str]) -> None:
        """Let ``addresses`` through ``host``'s firewall again, keeping its other rules."""
        current = self.blocked.get(host.name, set()) - addresses
        firewall.apply(host, current)
        if current:
            self.blocked[host.name] = current
        else:
            self.blocked.pop(host.name, None)

    def isolate(self, host: Host) -> None:
        """Cut ``host`` from every other host and from the machine (the test's clients) too."""
        assert self.network is not None
        others = {h.address for h in self.network.hosts.values() if h.name != host.name}
        self.block(host, others | {self.network.gateway})

    def heal(self, host: Host | None = None) -> None:
        """Remove ``host``'s rules, or every host's."""
        assert self.network is not None
        names = [host.name] if host is not None else list(self.blocked)
        for name in names:
            if self.blocked.pop(name, None) is not None:
                firewall.apply(self.network.hosts[name], set())

    # ---- what the cluster looks like, from ZooKeeper

    def quorum_serving(self) -> bool:
        modes = [z.mode() for z in self.zookeepers.values()]
        serving = sum(m in ("leader", "follower", "standalone") for m in modes)
        return ("leader" in modes or "standalone" in modes) and serving > len(modes) // 2

    def zk_leader(self) -> int | None:
        for sid, z in self.zookeepers.items():
            if z.mode() == "leader":
                return sid
        return None

    def zk(self) -> KazooClient:
        if self._zk is None:
            logging.getLogger("kazoo").setLevel(logging.ERROR)
            self._zk = KazooClient(hosts=self.zk_connect + CHROOT, timeout=5.0, connection_retry={"max_tries": -1})
            self._zk.start(timeout=30)
        return self._zk

    def _read_json(self, path: str) -> Any:
        try:
            data, _stat = self.zk().get(path)
        except Exception:
            return None
        return json.loads(data) if data else None

    def controller_id(self) -> int | None:
        node = self._read_json("/controller")
        return None if node is None else int(node["brokerid"])

    def controller_epoch(self) -> int | None:
        node = self._read_json("/controller_epoch")
        return None if node is None else int(node)

    def registered_brokers(self) -> set[int]:
        try:
            return {int(c) for c in self.zk().get_children("/brokers/ids")}
        except Exception:
            return set()

    def brokers_know_each_other(self) -> bool:
        for b in self.brokers.values():
            try:
                with KafkaConnection(b.address) as conn:
                    if len(metadata(conn, []).brokers) != self.broker_count:
                        return False
            except OSError:
                return False
        return True

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """Kafka's partition state znode: leader, leader_epoch, isr, controller_epoch."""
        result: dict[str, Any] | None = self._read_json(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return result

    def leader_of(self, topic: str, partition: int) -> int | None:
        state = self.partition_state(topic, partition)
        return None if state is None or state["leader"] < 0 else int(state["leader"])

    def healthy(self, topics: dict[str, int]) -> bool:
        """Every broker running and registered, a controller, the quorum serving, and every partition of
        ``topics`` (name -> partitions) led with every replica back in its ISR."""
        if not all(b.alive and not b.paused for b in self.brokers.values()) or self.blocked:
            return False
        if not self.quorum_serving() or self.registered_brokers() != set(self.brokers):
            return False
        if self.controller_id() is None:
            return False
        for topic, count in topics.items():
            for p in range(count):
                state = self.partition_state(topic, p)
                if state is None or state["leader"] < 0 or len(state["isr"]) < self.broker_count:
                    return False
        return True
