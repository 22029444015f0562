"""The nemesis: a schedule of faults drawn from a seed, and the code that injects and heals them on a :class:`Lab`.

The schedule is pure (:func:`draw`): the seed decides the kinds, their order, the roles they strike ("the leader of
partition 1", "broker 2", "the ZooKeeper quorum leader") and how long each fault holds. Roles name a position in
the cluster rather than a broker id because who leads what is the cluster's business; :class:`Nemesis` resolves
them when the fault starts and prints what it hit, so a run is reproduced from its seed and read from its output.

Kinds (issue 15): kill -9 / SIGSTOP / SIGTERM-and-restart a broker; isolate a broker's host completely (from
peers, ZooKeeper and clients); cut a partition leader from ZooKeeper only (clients and peers still reach it); cut a
broker from one peer only; kill -9 a ZooKeeper follower or the quorum leader (restarted afterwards).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from odradek.lab.cluster import Lab
from odradek.lab.processes import wait_until

__all__ = ["Fault", "FaultEvent", "Kind", "Nemesis", "draw", "format_schedule"]

log = logging.getLogger(__name__)


class Kind(StrEnum):
    KILL_BROKER = "kill-broker"
    PAUSE_BROKER = "pause-broker"
    RESTART_BROKER = "restart-broker"
    ISOLATE_BROKER = "isolate-broker"
    LEADER_CUT_FROM_ZK = "leader-cut-from-zookeeper"
    BROKER_CUT_FROM_PEER = "broker-cut-from-peer"
    KILL_ZK_FOLLOWER = "kill-zookeeper-follower"
    KILL_ZK_LEADER = "kill-zookeeper-leader"


@dataclass(frozen=True)
class Fault:
    """One step: ``kind`` strikes ``target`` (a role), holds ``hold_s`` seconds, then is healed.

    Targets: ``leader:<partition>`` (the current leader of that partition of the watched topic), ``broker:<id>``,
    ``controller``, ``coordinator`` (the leader of the partition of an internal topic the :class:`Nemesis` is given:
    a transaction coordinator); a peer cut also names ``peer`` as an offset (1 or 2) from the target among broker
    ids."""

    kind: Kind
    target: str
    hold_s: float
    peer: int = 0

    def describe(self) -> str:
        extra = f" peer+{self.peer}" if self.kind is Kind.BROKER_CUT_FROM_PEER else ""
        return f"{self.kind.value} {self.target}{extra} for {self.hold_s:.1f}s"


def draw(seed: int, count: int | None, *, partitions: int, brokers: int, hold_s: tuple[float, float] = (4.0, 8.0),
         kinds: tuple[Kind, ...] = tuple(Kind)) -> list[Fault]:
    """``count`` faults drawn from ``seed``; ``count=None``: every kind exactly once, in an order the seed picks."""
    rng = random.Random(seed)
    if count is None:
        chosen = list(kinds)
        rng.shuffle(chosen)
    else:
        chosen = [rng.choice(kinds) for _ in range(count)]
    faults = []
    for kind in chosen:
        roll = rng.random()
        if kind in (Kind.KILL_ZK_FOLLOWER, Kind.KILL_ZK_LEADER):
            target = "zookeeper"
        elif kind is Kind.LEADER_CUT_FROM_ZK or roll < 0.5:
            target = f"leader:{rng.randrange(partitions)}"
        elif roll < 0.7:
            target = "controller"
        else:
            target = f"broker:{rng.randrange(brokers)}"
        hold = round(rng.uniform(*hold_s), 1)
        peer = rng.randrange(1, brokers) if kind is Kind.BROKER_CUT_FROM_PEER else 0
        faults.append(Fault(kind, target, hold, peer))
    return faults


def format_schedule(seed: int, faults: list[Fault]) -> str:
    lines = [f"nemesis schedule, seed {seed}: {len(faults)} faults"]
    lines += [f"  {n:2d}. {f.describe()}" for n, f in enumerate(faults, 1)]
    return "\n".join(lines)


@dataclass
class FaultEvent:
    """What happened: the fault, what it resolved to, and when (``time.time()``) it started, healed, recovered."""

    fault: Fault
    resolved: str
    started: float
    healed: float = 0.0
    healthy: float | None = None  # the cluster healthy again (every replica back in its ISR); None: not in time


class Nemesis:
    """Injects a schedule on a lab. ``topic`` is the topic whose partition leaders ``leader:<p>`` names."""

    def __init__(self, lab: Lab, topic: str, topics: dict[str, int], *, heal_timeout_s: float = 90.0,
                 say: Callable[[str], None] = print, coordinator: tuple[str, int] | None = None) -> None:
        self.coordinator = coordinator  # (internal topic, partition) whose leader ``coordinator`` names
        self.lab = lab
        self.topic = topic
        self.topics = topics
        self.heal_timeout_s = heal_timeout_s
        self.say = say
        self.events: list[FaultEvent] = []

    def _broker(self, target: str) -> int:
        if target == "controller":
            found = self.lab.controller_id()
        elif target == "coordinator" and self.coordinator is not None:
            found = self.lab.leader_of(*self.coordinator)
        elif target.startswith("leader:"):
            found = self.lab.leader_of(self.topic, int(target.split(":")[1]))
        else:
            found = int(target.split(":")[1])
        if found is None:  # no controller or leader right now: fall back to a fixed broker, and say so
            self.say(f"    ({target} unknown; striking broker 0)")
            found = 0
        return found

    def run(self, faults: list[Fault], between: Callable[[], None] = lambda: None) -> list[FaultEvent]:
        for n, fault in enumerate(faults, 1):
            event = self.inject(fault)
            self.say(f"  {n:2d}. {time.strftime('%H:%M:%S')} {fault.describe()} -> {event.resolved}")
            time.sleep(fault.hold_s)  # the fault's duration is the point: nothing to wait on
            self.heal(event)
            self.wait_healthy(event)
            recovered = "not healthy in time" if event.healthy is None else \
                f"healthy {event.healthy - event.healed:.1f}s after heal"
            self.say(f"      healed; {recovered}")
            between()
        return self.events

    def inject(self, fault: Fault) -> FaultEvent:
        lab = self.lab
        k = fault.kind
        if k in (Kind.KILL_ZK_FOLLOWER, Kind.KILL_ZK_LEADER):
            leader = lab.zk_leader()
            if k is Kind.KILL_ZK_LEADER and leader is not None:
                sid = leader
            else:
                sid = next(s for s in sorted(lab.zookeepers) if s != leader)
            lab.zookeepers[sid].kill()
            event = FaultEvent(fault, f"zk{sid} ({'leader' if sid == leader else 'follower'}) killed", time.time())
        else:
            bid = self._broker(fault.target)
            broker = lab.brokers[bid]
            host = broker.host
            if k is Kind.KILL_BROKER:
                broker.kill()
                what = f"broker {bid} killed"
            elif k is Kind.PAUSE_BROKER:
                broker.pause()
                what = f"broker {bid} paused (SIGSTOP)"
            elif k is Kind.RESTART_BROKER:
                broker.terminate()
                what = f"broker {bid} stopped (SIGTERM, controlled shutdown)"
            elif k is Kind.ISOLATE_BROKER:
                lab.isolate(host)
                what = f"broker {bid} ({host.address}) isolated"
            elif k is Kind.LEADER_CUT_FROM_ZK:
                lab.block(host, {z.host.address for z in lab.zookeepers.values()})
                what = f"broker {bid} ({host.address}) cut from ZooKeeper only"
            else:
                ids = sorted(lab.brokers)
                peer = ids[(ids.index(bid) + fault.peer) % len(ids)]
                lab.block(host, {lab.brokers[peer].host.address})
                what = f"broker {bid} cut from broker {peer} only"
            event = FaultEvent(fault, what, time.time())
        self.events.append(event)
        return event

    def heal(self, event: FaultEvent) -> None:
        lab = self.lab
        lab.heal()
        for z in lab.zookeepers.values():
            if not z.alive:
                z.start()
        for b in lab.brokers.values():
            if b.paused:
                b.resume()
            if not b.alive:
                b.start(timeout=90)
        event.healed = time.time()

    def wait_healthy(self, event: FaultEvent) -> None:
        try:
            wait_until(lambda: self.lab.healthy(self.topics), self.heal_timeout_s, "the cluster healthy", 0.25)
            event.healthy = time.time()
        except TimeoutError:
            event.healthy = None
