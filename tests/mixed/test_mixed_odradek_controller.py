"""An odradek controller and a Kafka 3.9 broker on one ZooKeeper: two odradek brokers (ids 1 and 2, started first,
so one of them wins ``/controller``) and one Kafka broker (id 3) at ``inter.broker.protocol.version=2.6``.

Kafka reads the znodes odradek wrote (``/cluster/id``, ``/controller``, topics with odradek's topic ids); it obeys
odradek's LeaderAndIsr v4, UpdateMetadata v6 and StopReplica v3, replicates from odradek leaders and leads
partitions odradek replicates; it asks odradek's controller for a controlled shutdown (ControlledShutdown v3); both
kinds hand out producer ids from the one ``/latest_producer_id_block``.
"""

from __future__ import annotations

import concurrent.futures
import json
import signal
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from mixed_support import MixedCluster, controller_id, init_producer_id, load_through, wait_full_isr
from workload import create_replicated_topic, partition_view

from brokers import wait_for
from kafka_clients import opened
from odradek.admin import metadata
from odradek.broker.group.schema import partition_for
from odradek.client import KafkaConnection
from odradek.coordination import znodes as zn
from odradek.coordination.localzk import LocalZooKeeper

pytestmark = pytest.mark.zookeeper

ODRADEK_IDS = (1, 2)
KAFKA_ID = 3
TOPIC = "mixed-oc"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[MixedCluster]:
    mixed = MixedCluster(tmp_path_factory.mktemp("mixed-odradek-controller"), zookeeper.hosts,
                         kafka_ids=[KAFKA_ID], odradek_ids=ODRADEK_IDS, ibp="2.6")
    with mixed.start("odradek"):
        yield mixed


def test_kafka_joins_on_the_znodes_and_metadata_odradek_wrote(cluster: MixedCluster) -> None:
    kafka = cluster.kafka.brokers[0].address
    with cluster.zk() as zk:
        cluster_id = zn.ClusterId.from_json(zk.get(zn.CLUSTER_ID)[0]).id
        kafka_registration = zn.BrokerRegistration.from_json(zk.get(zn.broker_path(KAFKA_ID))[0],
                                                             zn.broker_path(KAFKA_ID))
    assert kafka_registration.version == 4
    controller = controller_id(cluster)
    expected = {KAFKA_ID: kafka} | {i: b.address for i, b in cluster.odradek.items()}

    def kafka_metadata() -> bool:
        with KafkaConnection(kafka) as conn:
            response = metadata(conn, [])
        return (response.cluster_id == cluster_id and response.controller_id == controller
                and {b.node_id: f"{b.host}:{b.port}" for b in response.brokers} == expected)

    # The cluster id Kafka read from /cluster/id; the brokers and the controller id from odradek's UpdateMetadata.
    wait_for(kafka_metadata, 60, what="Kafka's metadata naming odradek's cluster id, controller and brokers")


def test_both_kinds_take_producer_ids_from_one_block_znode(cluster: MixedCluster) -> None:
    addresses = [cluster.kafka.brokers[0].address] + [b.address for b in cluster.odradek.values()]
    ids = [init_producer_id(a) for a in addresses for _ in range(2)]
    assert len(set(ids)) == len(ids), ids
    with cluster.zk() as zk:
        block = json.loads(zk.get("/latest_producer_id_block")[0])
    assert int(block["block_end"]) >= max(ids) and block["broker"] in (KAFKA_ID, *ODRADEK_IDS)
    # blocks are 1000 ids wide on both kinds: three brokers hold three different blocks
    assert len({i // 1000 for i in ids}) == len(addresses)


def test_an_rf3_topic_replicates_across_kinds_through_kafkas_controlled_shutdown(cluster: MixedCluster) -> None:
    odradek_address = cluster.odradek[ODRADEK_IDS[0]].address
    create_replicated_topic(odradek_address, TOPIC, PARTITIONS)  # through odradek: its controller assigns
    view = wait_full_isr(odradek_address, TOPIC, PARTITIONS, 3)
    assert {leader for leader, _r, _i in view.values()} == {KAFKA_ID, *ODRADEK_IDS}  # each kind leads a partition
    with cluster.zk() as zk:
        assignment = zn.TopicAssignment.from_json(zk.get(zn.topic_path(TOPIC))[0], zn.topic_path(TOPIC))
    assert assignment.topic_id is not None and len(assignment.topic_id) == 22  # Kafka's base64 form

    kafka = cluster.kafka.brokers[0]

    def controlled_shutdown() -> None:  # SIGTERM: Kafka asks odradek's controller to move its leaderships first
        kafka.stop()
        assert "Controlled shutdown request returned successfully" in kafka.server_log.read_text(errors="replace")

    load_through(cluster, TOPIC, PARTITIONS, controlled_shutdown, kafka.start)
    wait_for(lambda: partition_view(kafka.address, TOPIC) == partition_view(odradek_address, TOPIC), 30,
             what="Kafka's metadata (from odradek's UpdateMetadata) agreeing with odradek's")


def test_the_odradek_controller_killed_the_cluster_carries_on_under_the_next(cluster: MixedCluster) -> None:
    """Whichever broker wins ``/controller`` next (the other odradek broker or the Kafka broker), the killed one
    comes back as a follower of it and every ISR fills again."""
    topic = f"{TOPIC}-failover"
    kafka_address = cluster.kafka.brokers[0].address
    old = controller_id(cluster)
    assert old in ODRADEK_IDS
    # CreateTopics goes to the controller: a Kafka broker that is not the controller answers NOT_CONTROLLER
    create_replicated_topic(cluster.odradek[old].address, topic, PARTITIONS)
    wait_full_isr(kafka_address, topic, PARTITIONS, 3)

    def kill_the_controller() -> None:
        cluster.odradek[old].signal(signal.SIGKILL)
        wait_for(lambda: controller_id(cluster) not in (None, old), 60, what="a new controller")

    load_through(cluster, topic, PARTITIONS, kill_the_controller, cluster.odradek[old].start)


_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
           KafkaError._TIMED_OUT, KafkaError._TRANSPORT}


def _group_moving(cluster: MixedCluster, old: int, new: int) -> str:
    """A group id whose ``__consumer_offsets`` partition is led by ``old`` and whose controlled-shutdown successor
    (the first other ISR member in assignment order) is ``new``: stopping ``old`` moves its coordinator to ``new``."""
    view = partition_view(cluster.bootstrap, "__consumer_offsets")
    for n in range(10_000):
        group = f"mixed-group-{n}"
        leader, replicas, isr = view[partition_for(group, len(view))]
        if leader == old and [r for r in replicas if r in isr and r != old][:1] == [new]:
            return group
    raise AssertionError(f"no group led by {old} with {new} next: {view}")


@pytest.mark.parametrize(("old", "new"), [(KAFKA_ID, ODRADEK_IDS[0]), (ODRADEK_IDS[0], KAFKA_ID)],
                         ids=["kafka-to-odradek", "odradek-to-kafka"])
def test_committed_offsets_survive_the_group_coordinator_moving_to_the_other_kind(
    cluster: MixedCluster, old: int, new: int,
) -> None:
    """A group commits through a coordinator of one kind; that broker stops (controlled), the ``__consumer_offsets``
    partition's leadership moves to a broker of the other kind that replicated the commit records, and that new
    coordinator reads them and serves the same committed offsets."""
    topic = f"{TOPIC}-group-{old}"
    controller = controller_id(cluster)  # either kind, after the failover above
    assert controller is not None
    create_replicated_topic(cluster.address(controller), topic, PARTITIONS)
    wait_full_isr(cluster.bootstrap, topic, PARTITIONS, 3)
    wait_full_isr(cluster.bootstrap, "__consumer_offsets", 50, 3)
    group = _group_moving(cluster, old, new)
    producer = opened(Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}))
    for i in range(300):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
    assert producer.flush(60) == 0

    consumer = opened(Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                                "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    seen = 0

    def read_all() -> bool:
        nonlocal seen
        seen += sum(1 for m in consumer.consume(500, 0.5) if m.error() is None)
        return seen >= 300

    wait_for(read_all, 60, what="the group reading every record")
    consumer.commit(asynchronous=False)
    consumer.close()

    def coordinator() -> int | None:
        """The group's coordinator; None while it moves (the retriable coordinator errors)."""
        admin = opened(AdminClient({"bootstrap.servers": cluster.bootstrap}))
        try:
            return int(admin.describe_consumer_groups([group], request_timeout=10)[group].result(30).coordinator.id)
        except KafkaException as exc:
            if exc.args[0].code() not in _MOVING:
                raise
            return None
        except concurrent.futures.TimeoutError:  # asked the old coordinator, which is gone: ask again
            return None

    assert wait_for(coordinator, 30, what="the group's coordinator") == old
    stop_broker = cluster.kafka.brokers[0].stop if old == KAFKA_ID else cluster.odradek[old].signal
    stop_broker()  # SIGTERM: a controlled shutdown moves the offsets partition's leadership to ``new``
    wait_for(lambda: coordinator() == new, 120, what=f"broker {new} becoming the group's coordinator")
    resumed = opened(Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                               "enable.auto.commit": False}))
    committed = resumed.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    assert {tp.partition: tp.offset for tp in committed} == {p: 100 for p in range(PARTITIONS)}
    resumed.close()
    if old == KAFKA_ID:
        cluster.kafka.brokers[0].start()
    else:
        cluster.odradek[old].start()
    wait_full_isr(cluster.bootstrap, topic, PARTITIONS, 3)
    assert cluster.kafka_errors() == []
    assert cluster.odradek_problems() == []
