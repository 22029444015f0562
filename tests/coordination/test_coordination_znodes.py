"""Kafka's znode JSON: round trips, the bytes Kafka itself writes, and bad data refused with its path."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordination import znodes as z
from odradek.coordination.znodes import TopicPartition as TP


def compact(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


# ------------------------------------------------------------------------------------------- paths


def test_paths_are_kafkas() -> None:
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.topic_path("t") == "/brokers/topics/t"
    assert z.partition_state_path("t", 7) == "/brokers/topics/t/partitions/7/state"
    assert z.delete_topic_path("t") == "/admin/delete_topics/t"
    assert z.topic_config_path("t") == "/config/topics/t"
    assert (z.CONTROLLER, z.CONTROLLER_EPOCH, z.CLUSTER_ID) == (
        "/controller",
        "/controller_epoch",
        "/cluster/id",
    )
    assert (z.REASSIGN_PARTITIONS, z.PREFERRED_REPLICA_ELECTION) == (
        "/admin/reassign_partitions",
        "/admin/preferred_replica_election",
    )
    assert z.sequence_number("/isr_change_notification/isr_change_0000000042", z.ISR_CHANGE_PREFIX) == "0000000042"
    assert z.sequence_number("/config/changes/config_change_0000000001", z.CONFIG_CHANGE_PREFIX) == "0000000001"
    with pytest.raises(ValueError):
        z.sequence_number("/isr_change_notification/other_1", z.ISR_CHANGE_PREFIX)


async def test_kafka_layout_is_created_in_a_store() -> None:
    from odradek.coordination import EmbeddedBackend

    async with EmbeddedBackend() as backend:
        s = await backend.session()
        await z.ensure_kafka_layout(s)
        await z.ensure_kafka_layout(s)  # idempotent, as every broker start runs it
        for path in z.PERSISTENT_PATHS:
            assert await s.exists(path) is not None
        registration = z.BrokerRegistration(1, (z.Endpoint("PLAINTEXT", "h", 9092),), timestamp=5)
        await s.create(z.broker_path(1), registration.to_json(), ephemeral=True)
        data, _ = await s.get(z.broker_path(1))
        assert z.BrokerRegistration.from_json(data, z.broker_path(1)) == z.BrokerRegistration(
            1, (z.Endpoint("PLAINTEXT", "h", 9092),), {"PLAINTEXT": "PLAINTEXT"}, timestamp=5
        )


async def test_generated_broker_ids_are_unique_across_sessions() -> None:
    from odradek.coordination import EmbeddedBackend

    async with EmbeddedBackend() as backend:
        sessions = [await backend.session() for _ in range(3)]
        ids = await asyncio.gather(*(z.generate_broker_id(s) for s in sessions for _ in range(4)))
        assert sorted(ids) == list(range(1001, 1013))


# ------------------------------------------------------------------------------------------- brokers


def test_broker_registration_writes_version_4_like_kafka() -> None:
    reg = z.BrokerRegistration(
        broker_id=1,
        endpoints=(z.Endpoint("PLAINTEXT", "broker1", 9092),),
        listener_security_protocol_map={"PLAINTEXT": "PLAINTEXT"},
        rack="rack-a",
        timestamp=1542014520532,
    )
    assert json.loads(reg.to_json()) == {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://broker1:9092"],
        "jmx_port": -1,
        "host": "broker1",
        "timestamp": "1542014520532",
        "port": 9092,
        "version": 4,
        "rack": "rack-a",
    }
    assert z.BrokerRegistration.from_json(reg.to_json(), "/brokers/ids/1") == reg


@pytest.mark.parametrize(
    ("raw", "endpoints", "rack", "host", "port"),
    [
        (  # ZkData's version 1 example
            b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}',
            (z.Endpoint("PLAINTEXT", "localhost", 9092),),
            None,
            "localhost",
            9092,
        ),
        (  # version 3: endpoints and rack
            b'{"version":3,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
            b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"],"rack":"dc1"}',
            (z.Endpoint("PLAINTEXT", "host1", 9092), z.Endpoint("SSL", "host1", 9093)),
            "dc1",
            "host1",
            9092,
        ),
        (  # what a Kafka 2.x broker leaves in ZooKeeper (zkCli get /brokers/ids/0)
            b'{"listener_security_protocol_map":{"CLIENT":"PLAINTEXT","REPLICATION":"SSL"},'
            b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],"jmx_port":-1,"host":"host1",'
            b'"timestamp":"1542014520532","port":9092,"version":4}',
            (z.Endpoint("CLIENT", "host1", 9092), z.Endpoint("REPLICATION", "host1", 9093)),
            None,
            "host1",
            9092,
        ),
        (  # version 5 (Kafka 2.7+) adds features; IPv6 endpoint
            b'{"features":{"metadata.version":{"min_version":1,"max_version":3}},'
            b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://[::1]:9092"],'
            b'"jmx_port":-1,"port":9092,"host":"::1","version":5,"timestamp":"1620000000000","rack":null}',
            (z.Endpoint("PLAINTEXT", "::1", 9092),),
            None,
            "::1",
            9092,
        ),
    ],
)
def test_broker_registration_parses_what_kafka_wrote(
    raw: bytes, endpoints: tuple[z.Endpoint, ...], rack: str | None, host: str, port: int
) -> None:
    reg = z.BrokerRegistration.from_json(raw, "/brokers/ids/0")
    assert reg.broker_id == 0
    assert reg.endpoints == endpoints
    assert reg.rack == rack
    assert (reg.host, reg.port) == (host, port)
    again = z.BrokerRegistration.from_json(reg.to_json(), "/brokers/ids/0")
    assert again == reg


def test_endpoint_text_round_trips() -> None:
    for text in ["PLAINTEXT://h:1", "SSL://[fe80::1]:9093", "INTERNAL://:9092"]:
        assert str(z.Endpoint.parse(text)) == text
    for bad in ["h:1", "PLAINTEXT://h", "PLAINTEXT://h:x"]:
        with pytest.raises(ValueError):
            z.Endpoint.parse(bad)


# ------------------------------------------------------------------------------------------- controller


def test_controller_znode_as_the_seed_elector_writes_it() -> None:
    # seed 001 section 9: Json.encode(Map("version" -> 1, "brokerid" -> brokerId, "timestamp" -> timestamp))
    kafka = b'{"version":1,"brokerid":2,"timestamp":"1542014520532"}'
    reg = z.ControllerRegistration.from_json(kafka)
    assert reg == z.ControllerRegistration(2, 1542014520532)
    assert json.loads(reg.to_json()) == json.loads(kafka)
    assert z.ControllerRegistration.from_json(b'{"version":1,"brokerid":2,"timestamp":1}').timestamp == 1


def test_controller_epoch_is_bare_text() -> None:
    assert z.encode_controller_epoch(17) == b"17"
    assert z.decode_controller_epoch(b"17") == 17
    with pytest.raises(z.ZnodeDataError) as bad:
        z.decode_controller_epoch(b'{"epoch":1}')
    assert bad.value.path == "/controller_epoch"


# ------------------------------------------------------------------------------------------- topics


def test_topic_assignment_versions() -> None:
    v1 = z.TopicAssignment.from_json(b'{"version":1,"partitions":{"0":[1,2],"1":[2,3]}}', "/brokers/topics/t")
    assert v1 == z.TopicAssignment({0: (1, 2), 1: (2, 3)})
    v2_raw = (
        b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,4]},'
        b'"adding_replicas":{"0":[3]},"removing_replicas":{"1":[4]}}'
    )
    v2 = z.TopicAssignment.from_json(v2_raw, "/brokers/topics/t")
    assert v2.adding_replicas == {0: (3,)} and v2.removing_replicas == {1: (4,)}
    assert json.loads(v2.to_json()) == json.loads(v2_raw)
    plain = json.loads(z.TopicAssignment({0: (1,)}).to_json())
    assert plain == {"version": 2, "partitions": {"0": [1]}, "adding_replicas": {}, "removing_replicas": {}}
    v3 = z.TopicAssignment({0: (1,)}, topic_id="y4ZRUa7bRlqSmrr5E8jPNg")
    assert json.loads(v3.to_json())["version"] == 3
    assert z.TopicAssignment.from_json(v3.to_json(), "/brokers/topics/t") == v3


def test_topic_ids_are_written_in_kafkas_base64_form_and_read_in_both() -> None:
    """Kafka 3.9's controller fails on a ``topic_id`` that is not 22 characters of URL-safe base64 (Uuid.fromString),
    so odradek writes that form; the dashed form odradek wrote before is still read, and rewritten on any write."""
    topic_id = uuid.UUID("f87316db-f93c-4e80-960c-5d2b1a0c3e11")
    assert z.encode_topic_id(topic_id) == "-HMW2_k8ToCWDF0rGgw-EQ"
    assert z.decode_topic_id("-HMW2_k8ToCWDF0rGgw-EQ") == topic_id
    assert z.decode_topic_id(str(topic_id)) == topic_id
    kafka = (b'{"partitions":{"0":[2,1,3]},"topic_id":"x8Z5k2kBRwabo7Yo7mArQA","adding_replicas":{},'
             b'"removing_replicas":{},"version":3}')
    assignment = z.TopicAssignment.from_json(kafka, "/brokers/topics/t")
    assert z.encode_topic_id(z.decode_topic_id(assignment.topic_id or "")) == "x8Z5k2kBRwabo7Yo7mArQA"
    assert json.loads(assignment.to_json()) == json.loads(kafka)
    old = z.TopicAssignment({0: (1,)}, topic_id=str(topic_id))
    assert json.loads(old.to_json())["topic_id"] == "-HMW2_k8ToCWDF0rGgw-EQ"
    with pytest.raises(ValueError):
        z.decode_topic_id("not-a-topic-id")


def test_feature_znode_as_kafka_writes_it_at_each_ibp() -> None:
    ibp_26 = b'{"features":{},"version":1,"status":0}'  # what a 3.9 controller at IBP 2.6 wrote
    assert z.FeatureZnode.from_json(ibp_26) == z.FeatureZnode(1, False, {})
    assert z.FeatureZnode.from_json(ibp_26).to_json() == ibp_26
    ibp_39 = b'{"features":{"metadata.version":{"max_version_level":21}},"version":2,"status":1}'
    assert z.FeatureZnode.from_json(ibp_39) == z.FeatureZnode(2, True, {"metadata.version": 21})
    assert z.FeatureZnode.from_json(ibp_39).to_json() == ibp_39
    v1 = b'{"features":{"f":{"max_version_level":3,"min_version_level":3}},"version":1,"status":1}'
    assert z.FeatureZnode.from_json(v1).to_json() == v1
    for bad in (b'{"features":{},"version":3,"status":0}', b'{"features":{},"version":2,"status":7}',
                b'{"features":{},"version":2}'):
        with pytest.raises(z.ZnodeDataError):
            z.FeatureZnode.from_json(bad)


def test_partition_state_keeps_leader_recovery_state() -> None:
    recovering = b'{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":2,"isr":[3],"leader_recovery_state":1}'
    state = z.PartitionState.from_json(recovering, "/brokers/topics/t/partitions/0/state")
    assert state.leader_recovery_state == 1 and state.to_json() == recovering
    with pytest.raises(z.ZnodeDataError):
        z.PartitionState.from_json(recovering.replace(b'state":1', b'state":5'), "/p")


def test_partition_state_exactly_as_kafka() -> None:
    kafka = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
    state = z.PartitionState.from_json(kafka, "/brokers/topics/t/partitions/0/state")
    assert state == z.PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1)
    assert state.to_json() == kafka
    no_leader = z.PartitionState.from_json(
        b'{"controller_epoch":3,"leader":-1,"version":1,"leader_epoch":5,"isr":[]}', "/p"
    )
    assert no_leader.leader == -1 and no_leader.isr == ()


@given(
    leader=st.integers(-1, 1000),
    epoch=st.integers(0, 2**31 - 1),
    isr=st.lists(st.integers(0, 1000), max_size=5),
    controller_epoch=st.integers(0, 2**31 - 1),
)
def test_partition_state_round_trips(leader: int, epoch: int, isr: list[int], controller_epoch: int) -> None:
    state = z.PartitionState(leader, epoch, tuple(isr), controller_epoch)
    assert z.PartitionState.from_json(state.to_json(), "/p") == state


@given(st.dictionaries(st.integers(0, 500), st.lists(st.integers(0, 100), min_size=1, max_size=4), max_size=8))
def test_topic_assignment_round_trips(assignment: dict[int, list[int]]) -> None:
    value = z.TopicAssignment({p: tuple(r) for p, r in assignment.items()})
    assert z.TopicAssignment.from_json(value.to_json(), "/brokers/topics/t") == value


def test_topic_config_and_change_notification() -> None:
    cfg = z.TopicConfig.from_json(
        b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}', "/config/topics/t"
    )
    assert cfg.config == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert z.TopicConfig.from_json(cfg.to_json(), "/config/topics/t") == cfg
    change = z.ConfigChangeNotification("topics/t")
    assert change.to_json() == b'{"version":2,"entity_path":"topics/t"}'
    assert z.ConfigChangeNotification.from_json(change.to_json(), "/c") == change
    v1 = b'{"version":1,"entity_type":"topics","entity_name":"t"}'
    assert z.ConfigChangeNotification.from_json(v1, "/c") == change


def test_cluster_id_version_is_a_string() -> None:
    value = z.ClusterId("qM3Nj2kCRFCk4Gf0Lz5lXw")
    assert value.to_json() == b'{"version":"1","id":"qM3Nj2kCRFCk4Gf0Lz5lXw"}'
    assert z.ClusterId.from_json(value.to_json()) == value


# ------------------------------------------------------------------------------------------- admin


def test_reassignment_preferred_election_and_isr_change() -> None:
    raw = b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2,3]},' + (
        b'{"topic":"foo","partition":1,"replicas":[2,3,1]}]}'
    )
    reassign = z.PartitionReassignment.from_json(raw)
    assert reassign.partitions == {TP("foo", 0): (1, 2, 3), TP("foo", 1): (2, 3, 1)}
    assert reassign.to_json() == raw

    preferred = z.PreferredReplicaElection.from_json(
        b'{"version":1,"partitions":[{"topic":"foo","partition":1},{"topic":"bar","partition":0}]}'
    )
    assert preferred.partitions == {TP("foo", 1), TP("bar", 0)}
    assert z.PreferredReplicaElection.from_json(preferred.to_json()) == preferred

    isr = z.IsrChangeNotification.from_json(
        b'{"version":1,"partitions":[{"topic":"foo","partition":0}]}', "/isr_change_notification/isr_change_0"
    )
    assert isr.partitions == {TP("foo", 0)}
    assert isr.to_json() == b'{"version":1,"partitions":[{"topic":"foo","partition":0}]}'


# ------------------------------------------------------------------------------------------- bad data


Decoder = Callable[[bytes, str], object]

BAD: list[tuple[Decoder, bytes]] = [
    (z.PartitionState.from_json, b"not json"),
    (z.PartitionState.from_json, b"\xff\xfe"),
    (z.PartitionState.from_json, b"[1,2]"),
    (
        z.PartitionState.from_json,
        b'{"controller_epoch":1,"leader":"1","version":1,"leader_epoch":0,"isr":[1]}',
    ),
    (
        z.PartitionState.from_json,
        b'{"controller_epoch":1,"leader":true,"version":1,"leader_epoch":0,"isr":[1]}',
    ),
    (z.PartitionState.from_json, b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":"1"}'),
    (z.PartitionState.from_json, b'{"controller_epoch":1,"leader":1,"version":9,"leader_epoch":0,"isr":[1]}'),
    (z.PartitionState.from_json, b'{"controller_epoch":1,"version":1,"leader_epoch":0,"isr":[1]}'),
    (z.PartitionState.from_json, b""),
    (z.TopicAssignment.from_json, b'{"version":2,"partitions":{"zero":[1]}}'),
    (z.TopicAssignment.from_json, b'{"version":2,"partitions":[1,2]}'),
    (z.BrokerRegistration.from_json, b'{"version":4,"endpoints":["nonsense"],"jmx_port":-1}'),
    (z.BrokerRegistration.from_json, b'{"version":0,"host":"h","port":1}'),
    (z.ControllerRegistration.from_json, b'{"version":1,"timestamp":"1"}'),
    (z.PartitionReassignment.from_json, b'{"version":1,"partitions":[{"topic":"a","partition":0}]}'),
    (z.PartitionReassignment.from_json, b'{"version":1,"partitions":{"a":1}}'),
    (z.PreferredReplicaElection.from_json, b'{"version":1,"partitions":[{"topic":1,"partition":0}]}'),
    (z.IsrChangeNotification.from_json, b'{"version":1}'),
    (z.TopicConfig.from_json, b'{"version":1,"config":{"retention.ms":1000}}'),
    (z.ConfigChangeNotification.from_json, b'{"version":3,"entity_path":"topics/t"}'),
    (z.ClusterId.from_json, b'{"version":"1"}'),
]


@pytest.mark.parametrize(("decode", "raw"), BAD)
def test_bad_data_is_refused_with_its_path(decode: Decoder, raw: bytes) -> None:
    path = "/brokers/ids/7"
    with pytest.raises(z.ZnodeDataError) as error:
        decode(raw, path)
    assert error.value.path == path
    assert path in str(error.value)


def test_decode_or_skip_logs_and_returns_none(caplog: pytest.LogCaptureFixture) -> None:
    path = "/brokers/topics/t/partitions/0/state"
    with caplog.at_level(logging.WARNING, logger="odradek.coordination.znodes"):
        assert z.decode_or_skip(z.PartitionState.from_json, b"{oops", path) is None
    assert path in caplog.text
    good = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}'
    assert z.decode_or_skip(z.PartitionState.from_json, good, path) == z.PartitionState(1, 0, (1,), 1)
