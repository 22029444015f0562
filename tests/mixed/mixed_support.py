"""A mixed cluster for tests: Apache Kafka 3.9 brokers and ``odradek broker`` processes on one ZooKeeper chroot.

Each kind gets its own broker ids. Which kind holds the controller is decided by who starts first, as on a real
cluster: the first broker up creates ``/controller``. The Kafka brokers run at the ``inter.broker.protocol.version``
they are given, because that decides which controller request versions both sides must speak.
"""

from __future__ import annotations

import contextlib
import datetime
import re
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kio.index import load_request_schema

from brokers import ZooKeeperBroker, wait_for
from odradek.apache_kafka import KAFKA_3, KafkaCluster
from odradek.client import KafkaConnection
from odradek.coordination.znodes import CONTROLLER, ControllerRegistration
from odradek.errors import ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cluster"))

from workload import Load, check_nothing_lost, partition_view, read_back

INIT_PRODUCER_ID = 22
ODRADEK_OVERRIDES = {
    "zookeeper.session.timeout.ms": "6000", "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
KAFKA_OVERRIDES = {
    "zookeeper.session.timeout.ms": 6000, "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
    "controlled.shutdown.retry.backoff.ms": 500,
}


class MixedCluster:
    """Kafka 3.9 brokers and odradek brokers, each with the ids given, on one fresh chroot of ``zookeeper``."""

    def __init__(self, base: Path, zookeeper: str, *, kafka_ids: Sequence[int], odradek_ids: Sequence[int],
                 ibp: str, racks: Mapping[int, str] | None = None) -> None:
        """``racks``: broker id -> ``broker.rack`` (Kafka's is cluster-wide here, so give one Kafka broker a rack)."""
        self.base = base
        self.zookeeper = zookeeper
        self.ibp = ibp
        racks = dict(racks or {})
        kafka_racks = {racks[i] for i in kafka_ids if i in racks}
        if len(kafka_racks) > 1:
            raise ValueError("the Kafka brokers of a MixedCluster share one broker.rack")
        self.kafka = KafkaCluster(base / "kafka", version=KAFKA_3, zookeeper=zookeeper, broker_ids=kafka_ids,
                                  overrides={**KAFKA_OVERRIDES, "inter.broker.protocol.version": ibp,
                                             **({"broker.rack": kafka_racks.pop()} if kafka_racks else {})})
        self.chroot = self.kafka.chroot
        self.odradek = {i: ZooKeeperBroker(i, self.kafka.zookeeper_connect, base, ODRADEK_OVERRIDES, rack=racks.get(i),
                                          name="odradek") for i in odradek_ids}

    @property
    def bootstrap(self) -> str:
        """Every broker of both kinds that is running."""
        return ",".join([b.address for b in self.kafka.brokers if b.running()]
                        + [b.address for b in self.odradek.values() if b.alive])

    def address(self, broker_id: int) -> str:
        """``host:port`` of the broker with this id, of either kind."""
        if broker_id in self.odradek:
            return self.odradek[broker_id].address
        return self.kafka.broker(broker_id).address

    def start(self, first: str) -> MixedCluster:
        """Start the ``first`` kind (``"kafka"`` or ``"odradek"``), wait until one of its brokers holds
        ``/controller``, then start the other kind; everything started is stopped if any of it fails."""
        kafka_ids = {b.node_id for b in self.kafka.brokers}
        starts = [(self.kafka.start, kafka_ids), (self._start_odradek, set(self.odradek))]
        if first == "odradek":
            starts.reverse()
        try:
            starts[0][0]()
            wait_for(lambda: controller_id(self) in starts[0][1], 60, what=f"a {first} broker elected controller")
            starts[1][0]()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_odradek(self) -> None:
        for b in self.odradek.values():
            b.start()

    def stop(self) -> None:
        for b in self.odradek.values():
            b.signal(signal.SIGKILL)
        self.kafka.kill()

    def __enter__(self) -> MixedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @contextlib.contextmanager
    def zk(self) -> Iterator[KazooClient]:
        client = KazooClient(hosts=f"{self.zookeeper}{self.chroot}")
        client.start(30)
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def kafka_errors(self) -> list[str]:
        """ERROR lines of every Kafka broker's log, each with the three lines after it (the exception and where it
        was thrown). The test log configuration sends the controller's and the state-change logger's lines to this
        one file (``server.log``) rather than to files of their own.

        Left out: a Kafka controller's request thread interrupted while it waits to resend to a broker that went
        away (``RequestSendThread`` is interruptible and its retry pause throws ``InterruptedException`` when the
        controller removes that broker). That is Kafka's own race on any broker shutdown, whichever kind the broker
        is, not a request or response it could not handle."""
        errors: list[str] = []
        for b in self.kafka.brokers:
            if not b.server_log.exists():
                continue
            lines = b.server_log.read_text(errors="replace").splitlines()
            for i, line in enumerate(lines):
                if "] ERROR " not in line:
                    continue
                entry = "\n".join(lines[i:i + 4])
                if "fails to send a request to broker" in line and "java.lang.InterruptedException" in entry:
                    continue
                errors.append(entry)
        return errors

    def odradek_problems(self) -> list[str]:
        """Lines of the odradek brokers' logs that say a request of the other kind was not understood or failed."""
        pattern = re.compile(r"closing connection|Traceback|ERROR|corrupt batch")
        return [ln for b in self.odradek.values() for ln in b.log_text().splitlines() if pattern.search(ln)]


def controller_id(cluster: MixedCluster) -> int | None:
    """Who holds ``/controller``, read with odradek's codec whichever kind wrote it."""
    with cluster.zk() as zk:
        try:
            data, _ = zk.get(CONTROLLER)
        except NoNodeError:
            return None
    return ControllerRegistration.from_json(data).broker_id


def wait_full_isr(bootstrap: str, topic: str, partitions: int, replicas: int, timeout: float = 120) -> Any:
    """Until every partition has a leader and all ``replicas`` in its ISR, as the metadata of ``bootstrap`` says."""
    def full() -> Any:
        view = partition_view(bootstrap, topic)
        if len(view) != partitions:
            return None
        ok = all(leader >= 0 and len(isr) == replicas and sorted(isr) == sorted(reps)
                 for leader, reps, isr in view.values())
        return view if ok else None

    return wait_for(full, timeout, interval=0.5, what=f"full ISRs of {topic} via {bootstrap}")


def init_producer_id(address: str) -> int:
    """An idempotent producer's id from the broker at ``address`` (InitProducerId without a transactional id)."""
    with KafkaConnection(address) as conn:
        version = conn.version_for(INIT_PRODUCER_ID, 4)
        cls = load_request_schema(INIT_PRODUCER_ID, version)
        kwargs: dict[str, Any] = {"transactional_id": None, "transaction_timeout": datetime.timedelta(seconds=60)}
        if "producer_id" in cls.__dataclass_fields__:
            kwargs.update(producer_id=-1, producer_epoch=-1)
        response = conn.request(INIT_PRODUCER_ID, cls(**kwargs), version)
    assert response.error_code == ErrorCode.none, ErrorCode(response.error_code)
    return int(response.producer_id)


def load_through(cluster: MixedCluster, topic: str, partitions: int, fault: Callable[[], None],
                 recover: Callable[[], None]) -> None:
    """An idempotent acks=all load on ``topic`` through every running broker, kept up across ``fault`` and
    ``recover`` until every ISR is full again; then no acknowledged record is lost, duplicated or reordered and
    neither kind logged a problem with the other."""
    load = Load(cluster.bootstrap, topic, partitions)
    try:
        load.progress(300)
        fault()
        load.progress(300)
        recover()
        wait_full_isr(cluster.bootstrap, topic, partitions, 3)
        load.progress(300)
    finally:
        load.finish()
    assert not load.fatal_errors(), load.fatal_errors()
    check_nothing_lost(load, read_back(cluster.bootstrap, topic, partitions))
    assert cluster.kafka_errors() == []
    assert cluster.odradek_problems() == []
