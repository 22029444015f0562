"""The controller APIs' codec: golden bytes written by hand from Kafka's schemas, round trips, and malformed input.

The golden tests spell each body out field by field in schema order (LeaderAndIsrRequest.json v4,
UpdateMetadataRequest.json v6, StopReplicaRequest.json v3, ControlledShutdownRequest.json v3 and their responses),
so they fail if the encoding drifts from Kafka's format, not only if the encoder and decoder disagree.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.protocol.controller_requests import (
    CONTROLLED_SHUTDOWN,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    VERSIONS,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    MetadataBroker,
    MetadataEndpoint,
    PartitionError,
    RequestFormatError,
    StopReplicaPartition,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    decode_request,
    decode_response,
    encode_body,
    frame_response,
    parse_request_frame,
)

KEYS = (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(*vs: int) -> bytes:
    return b"".join(struct.pack(">i", v) for v in vs)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def cstr(s: str) -> bytes:
    """A compact string whose length fits one varint byte."""
    raw = s.encode()
    return bytes([len(raw) + 1]) + raw


def n(count: int) -> bytes:
    """A compact array length that fits one varint byte."""
    return bytes([count + 1])


TAGS = b"\x00"

# ------------------------------------------------------------------------------------------ golden bytes

LAIR = LeaderAndIsrRequest(
    controller_id=1, controller_epoch=5, broker_epoch=100,
    partition_states=[LeaderAndIsrPartitionState("t", 0, 5, 2, 7, [2, 3], 11, [2, 3, 4], [4], [], True)],
    live_leaders=[LeaderAndIsrLiveLeader(2, "h", 9092)],
)
LAIR_V4 = b"".join((
    i32(1), i32(5), i64(100),  # ControllerId, ControllerEpoch, BrokerEpoch
    n(1), cstr("t"),  # TopicStates[0].TopicName
    n(1), i32(0, 5, 2, 7),  # PartitionStates[0]: PartitionIndex, ControllerEpoch, Leader, LeaderEpoch
    n(2), i32(2, 3),  # Isr
    i32(11),  # PartitionEpoch (ZkVersion)
    n(3), i32(2, 3, 4),  # Replicas
    n(1), i32(4),  # AddingReplicas
    n(0),  # RemovingReplicas
    b"\x01", TAGS,  # IsNew, partition state's tagged fields
    TAGS,  # topic state's tagged fields
    n(1), i32(2), cstr("h"), i32(9092), TAGS,  # LiveLeaders[0]: BrokerId, HostName, Port
    TAGS,
))

UM = UpdateMetadataRequest(
    1, 5, 100, [UpdateMetadataPartitionState("t", 0, 5, -2, 7, [2], 11, [2, 3], [3])],
    [MetadataBroker(2, [MetadataEndpoint(9092, "h", "PLAINTEXT", "PLAINTEXT")], "r"), MetadataBroker(3, [], None)],
)
UM_V6 = b"".join((
    i32(1), i32(5), i64(100),  # ControllerId, ControllerEpoch, BrokerEpoch
    n(1), cstr("t"),  # TopicStates[0].TopicName
    n(1), i32(0, 5, -2, 7),  # PartitionIndex, ControllerEpoch, Leader (-2: being deleted), LeaderEpoch
    n(1), i32(2),  # Isr
    i32(11),  # ZkVersion
    n(2), i32(2, 3),  # Replicas
    n(1), i32(3),  # OfflineReplicas
    TAGS, TAGS,
    n(2),  # LiveBrokers
    i32(2), n(1), i32(9092), cstr("h"), cstr("PLAINTEXT"), i16(0), TAGS,  # Id; Endpoints[0]: Port, Host, Listener,
    cstr("r"), TAGS,  # Rack                                               # SecurityProtocol (0 = PLAINTEXT)
    i32(3), n(0), b"\x00", TAGS,  # no endpoints, null rack
    TAGS,
))

SR = StopReplicaRequest(1, 5, 100, True, [StopReplicaPartition("t", 0), StopReplicaPartition("u", 1),
                                          StopReplicaPartition("t", 2)])
SR_V3 = b"".join((
    i32(1), i32(5), i64(100),
    n(2),  # TopicStates, grouped by topic in order of first appearance
    cstr("t"), n(2),
    i32(0, -1), b"\x01", TAGS,  # PartitionIndex, LeaderEpoch (-1: not fenced), DeletePartition
    i32(2, -1), b"\x01", TAGS,
    TAGS,
    cstr("u"), n(1), i32(1, -1), b"\x01", TAGS, TAGS,
    TAGS,
))

CS = ControlledShutdownRequest(4, 123)
CS_V3 = i32(4) + i64(123) + TAGS

LAIR_RESPONSE = LeaderAndIsrResponse(0, [PartitionError("t", 0, 11)])
LAIR_RESPONSE_V4 = i16(0) + n(1) + cstr("t") + i32(0) + i16(11) + TAGS + TAGS
SR_RESPONSE = StopReplicaResponse(0, [PartitionError("t", 3, 0)])
SR_RESPONSE_V3 = i16(0) + n(1) + cstr("t") + i32(3) + i16(0) + TAGS + TAGS
UM_RESPONSE = UpdateMetadataResponse(11)
UM_RESPONSE_V6 = i16(11) + TAGS
CS_RESPONSE = ControlledShutdownResponse(0, [StopReplicaPartition("t", 1)])
CS_RESPONSE_V3 = i16(0) + n(1) + cstr("t") + i32(1) + TAGS + TAGS


# Two partitions of one shape: the first is read field by field, the second by the struct compiled for its shape;
# the second carries a tagged field (tag 3, one byte), which sends it back to the field-by-field reader.
LAIR_ENTRY = n(2) + i32(2, 3) + i32(11) + n(3) + i32(2, 3, 4) + n(1) + i32(4) + n(0) + b"\x01"
LAIR_TWO_V4 = b"".join((
    i32(1, 5), i64(100), n(1), cstr("t"), n(3),
    i32(0, 5, 2, 7), LAIR_ENTRY, TAGS,
    i32(1, 5, 2, 7), LAIR_ENTRY, TAGS,
    i32(2, 5, 2, 7), LAIR_ENTRY, b"\x01\x03\x01z",
    TAGS, n(0), TAGS,
))
UM_ENTRY = n(1) + i32(2) + i32(11) + n(2) + i32(2, 3) + n(1) + i32(3)
UM_TWO_V6 = b"".join((
    i32(1, 5), i64(100), n(1), cstr("t"), n(3),
    i32(0, 5, -2, 7), UM_ENTRY, TAGS,
    i32(1, 5, -2, 7), UM_ENTRY, TAGS,
    i32(2, 5, -2, 7), UM_ENTRY, b"\x01\x03\x01z",
    TAGS, n(0), TAGS,
))

GOLDEN_REQUESTS = [(LEADER_AND_ISR, LAIR, LAIR_V4), (UPDATE_METADATA, UM, UM_V6), (CONTROLLED_SHUTDOWN, CS, CS_V3)]
GOLDEN_RESPONSES = [(LEADER_AND_ISR, LAIR_RESPONSE, LAIR_RESPONSE_V4), (STOP_REPLICA, SR_RESPONSE, SR_RESPONSE_V3),
                    (UPDATE_METADATA, UM_RESPONSE, UM_RESPONSE_V6),
                    (CONTROLLED_SHUTDOWN, CS_RESPONSE, CS_RESPONSE_V3)]


def test_served_versions_are_the_flexible_ones_before_topic_ids() -> None:
    assert dict(VERSIONS) == {LEADER_AND_ISR: 4, STOP_REPLICA: 3, UPDATE_METADATA: 6, CONTROLLED_SHUTDOWN: 3}


@pytest.mark.parametrize(("key", "request_", "golden"), GOLDEN_REQUESTS)
def test_requests_are_kafkas_bytes(key, request_, golden) -> None:
    assert encode_body(request_) == golden
    assert decode_request(key, golden) == request_


def test_stop_replica_is_kafkas_bytes_grouped_by_topic() -> None:
    assert encode_body(SR) == SR_V3
    decoded = decode_request(STOP_REPLICA, SR_V3)
    assert decoded.delete_partitions is True
    assert decoded.partitions == [StopReplicaPartition("t", 0), StopReplicaPartition("t", 2),
                                  StopReplicaPartition("u", 1)]
    keep = StopReplicaRequest(1, 5, 100, False, [StopReplicaPartition("t", 0)])
    assert encode_body(keep) == i32(1, 5) + i64(100) + n(1) + cstr("t") + n(1) + i32(0, -1) + b"\x00" + TAGS * 3


@pytest.mark.parametrize(("key", "response", "golden"), GOLDEN_RESPONSES)
def test_responses_are_kafkas_bytes(key, response, golden) -> None:
    assert encode_body(response) == golden
    assert decode_response(key, golden) == response


def test_the_broker_reads_request_header_v2_and_writes_response_header_v1() -> None:
    frame = i16(4) + i16(4) + i32(42) + i16(18) + b"odradek-controller" + TAGS + LAIR_V4
    header, body = parse_request_frame(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        4, 4, 42, "odradek-controller")
    assert body == LAIR_V4
    assert parse_request_frame(i16(7) + i16(3) + i32(1) + i16(-1) + TAGS + CS_V3)[0].client_id is None
    assert frame_response(7, LAIR_RESPONSE_V4) == i32(5 + len(LAIR_RESPONSE_V4)) + i32(7) + TAGS + LAIR_RESPONSE_V4


def test_entries_of_one_shape_read_alike_and_tags_are_skipped() -> None:
    lair = decode_request(LEADER_AND_ISR, LAIR_TWO_V4)
    assert lair.partition_states == [
        LeaderAndIsrPartitionState("t", p, 5, 2, 7, [2, 3], 11, [2, 3, 4], [4], [], True) for p in range(3)]
    assert encode_body(lair) == LAIR_TWO_V4.replace(b"\x01\x03\x01z", TAGS)
    um = decode_request(UPDATE_METADATA, UM_TWO_V6)
    assert um.partition_states == [
        UpdateMetadataPartitionState("t", p, 5, -2, 7, [2], 11, [2, 3], [3]) for p in range(3)]
    assert encode_body(um) == UM_TWO_V6.replace(b"\x01\x03\x01z", TAGS)


def test_unknown_tagged_fields_are_skipped() -> None:
    tagged = b"\x02" + b"\x05\x02ab" + b"\x07\x00"  # two tags: 5 with two bytes, 7 with none
    assert decode_request(CONTROLLED_SHUTDOWN, i32(4) + i64(123) + tagged) == CS
    assert decode_response(UPDATE_METADATA, i16(11) + tagged) == UM_RESPONSE


def test_long_arrays_take_multi_byte_lengths() -> None:
    replicas = list(range(200))
    state = LeaderAndIsrPartitionState("t" * 300, 0, 1, 0, 1, replicas, 1, replicas, [], replicas[:3])
    request = LeaderAndIsrRequest(1, 1, -1, [state], [])
    body = encode_body(request)
    assert b"\xc9\x01" + i32(*replicas) in body  # 201 as a varint, then the ISR
    assert b"\xad\x02" + b"t" * 300 in body  # 301 as a varint, then the topic name
    assert decode_request(LEADER_AND_ISR, body) == request


# ------------------------------------------------------------------------------------------ round trips

int32 = st.integers(-(2**31), 2**31 - 1)
ids = st.lists(st.integers(-1, 2**31 - 1), max_size=6) | st.lists(int32, min_size=127, max_size=140)
names = st.text(max_size=12)
lair_states = st.builds(LeaderAndIsrPartitionState, names, int32, int32, int32, int32, ids, int32, ids, ids, ids,
                        st.booleans())
um_states = st.builds(UpdateMetadataPartitionState, names, int32, int32, int32, int32, ids, int32, ids, ids)
protocols = st.sampled_from(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])
epochs = st.integers(-(2**63), 2**63 - 1)


def grouped(items: list, topic=lambda x: x.topic) -> list:
    """What the wire gives back: entries grouped by topic, topics in order of first appearance."""
    order: dict[str, list] = {}
    for item in items:
        order.setdefault(topic(item), []).append(item)
    return [item for group in order.values() for item in group]


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.builds(LeaderAndIsrRequest, int32, int32, epochs, st.lists(lair_states, max_size=8),
                 st.lists(st.builds(LeaderAndIsrLiveLeader, int32, names, int32), max_size=3)))
def test_leader_and_isr_round_trips(request_) -> None:
    decoded = decode_request(LEADER_AND_ISR, encode_body(request_))
    request_.partition_states = grouped(request_.partition_states)
    assert decoded == request_


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.builds(UpdateMetadataRequest, int32, int32, epochs, st.lists(um_states, max_size=8),
                 st.lists(st.builds(MetadataBroker, int32,
                                    st.lists(st.builds(MetadataEndpoint, int32, names, names, protocols),
                                             max_size=2),
                                    st.none() | names), max_size=3)))
def test_update_metadata_round_trips(request_) -> None:
    decoded = decode_request(UPDATE_METADATA, encode_body(request_))
    request_.partition_states = grouped(request_.partition_states)
    assert decoded == request_


@given(st.builds(StopReplicaRequest, int32, int32, epochs, st.booleans(),
                 st.lists(st.builds(StopReplicaPartition, names, int32), min_size=1, max_size=8)))
def test_stop_replica_round_trips(request_) -> None:
    decoded = decode_request(STOP_REPLICA, encode_body(request_))
    request_.partitions = grouped(request_.partitions)
    assert decoded == request_


def test_empty_stop_replica_reads_back_without_its_flag() -> None:
    assert decode_request(STOP_REPLICA, encode_body(StopReplicaRequest(1, 2, 3, True, []))) == StopReplicaRequest(
        1, 2, 3, False, [])


@given(st.builds(ControlledShutdownRequest, int32, epochs))
def test_controlled_shutdown_round_trips(request_) -> None:
    assert decode_request(CONTROLLED_SHUTDOWN, encode_body(request_)) == request_


error_codes = st.integers(-(2**15), 2**15 - 1)
partition_errors = st.lists(st.builds(PartitionError, names, int32, error_codes), max_size=5)


@given(st.one_of(
    st.tuples(st.just(LEADER_AND_ISR), st.builds(LeaderAndIsrResponse, error_codes, partition_errors)),
    st.tuples(st.just(STOP_REPLICA), st.builds(StopReplicaResponse, error_codes, partition_errors)),
    st.tuples(st.just(UPDATE_METADATA), st.builds(UpdateMetadataResponse, error_codes)),
    st.tuples(st.just(CONTROLLED_SHUTDOWN), st.builds(
        ControlledShutdownResponse, error_codes, st.lists(st.builds(StopReplicaPartition, names, int32), max_size=5))),
))
def test_responses_round_trip(case) -> None:
    key, response = case
    assert decode_response(key, encode_body(response)) == response


def test_large_update_metadata_shares_its_encoded_states_across_brokers() -> None:
    states = [UpdateMetadataPartitionState(f"t{p % 7}", p, 3, 1, 5, [1, 2], 9, [1, 2], []) for p in range(500)]
    brokers = [MetadataBroker(1, [MetadataEndpoint(9092, "h", "PLAINTEXT")], None)]
    bodies = [encode_body(UpdateMetadataRequest(0, 3, epoch, states, brokers)) for epoch in (10, 11)]
    assert bodies[0][16:] == bodies[1][16:] and bodies[0][:16] != bodies[1][:16]
    assert decode_request(UPDATE_METADATA, bodies[1]) == UpdateMetadataRequest(0, 3, 11, grouped(states), brokers)
    states.append(states[0])  # a mutated list is a different request: the cache must not answer for it
    assert encode_body(UpdateMetadataRequest(0, 3, 11, list(states), brokers)) != bodies[1]


def test_unencodable_values_are_refused() -> None:
    with pytest.raises(RequestFormatError, match="security protocol 'INTERNAL'"):
        broker = MetadataBroker(1, [MetadataEndpoint(1, "h", "I", "INTERNAL")])
        encode_body(UpdateMetadataRequest(0, 1, 1, [], [broker]))
    with pytest.raises(RequestFormatError, match="cannot be encoded"):
        encode_body(ControlledShutdownRequest(2**31, 0))
    with pytest.raises(TypeError):
        encode_body(object())


# ------------------------------------------------------------------------------------------ malformed input

ALL_BODIES = [(decode_request, key, body) for key, _, body in GOLDEN_REQUESTS] + [
    (decode_request, STOP_REPLICA, SR_V3), (decode_request, LEADER_AND_ISR, LAIR_TWO_V4),
    (decode_request, UPDATE_METADATA, UM_TWO_V6)] + [(decode_response, key, body) for key, _, body in GOLDEN_RESPONSES]


@pytest.mark.parametrize(("decode", "key", "body"), ALL_BODIES)
def test_every_truncation_and_any_trailing_byte_is_refused(decode, key, body) -> None:
    for end in range(len(body)):
        with pytest.raises(RequestFormatError):
            decode(key, body[:end])
    with pytest.raises(RequestFormatError, match="bytes after"):
        decode(key, body + b"\x00")


@pytest.mark.parametrize(("body", "reason"), [
    (i32(1, 5) + i64(100) + b"\x00", "null array"),  # TopicStates null
    (i32(1, 5) + i64(100) + b"\xff\xff\xff\xff\x0f", "cannot fit"),  # 2**32 - 2 topics in a few bytes
    (i32(1, 5) + i64(100) + b"\xff\xff\xff\xff\xff\x01", "longer than 5 bytes"),  # runaway varint
    (i32(1, 5) + i64(100) + n(1) + b"\x03\xff\xfe", "not UTF-8"),
    (i32(1, 5) + i64(100) + n(1) + b"\x00", "null string"),
    (i32(1, 5) + i64(100) + n(1) + b"\x10t", "runs past the end"),  # string longer than the body
    (LAIR_V4[:36] + b"\x7f", "runs past the end"),  # an ISR of 126 int32s in a few bytes
    (LAIR_V4[:36] + b"\x00", "null int32 array"),
])
def test_bad_lengths_and_text_are_refused_with_a_reason(body, reason) -> None:
    with pytest.raises(RequestFormatError, match=reason):
        decode_request(LEADER_AND_ISR, body)


def test_mixed_delete_flags_and_unknown_protocols_are_refused() -> None:
    mixed = i32(1, 5) + i64(100) + n(1) + cstr("t") + n(2) + i32(0, -1) + b"\x01" + TAGS + i32(1, -1) + b"\x00" + TAGS
    with pytest.raises(RequestFormatError, match="disagree on DeletePartition"):
        decode_request(STOP_REPLICA, mixed + TAGS + TAGS)
    unknown = UM_V6.replace(cstr("PLAINTEXT") + i16(0), cstr("PLAINTEXT") + i16(9))
    with pytest.raises(RequestFormatError, match="security protocol id 9"):
        decode_request(UPDATE_METADATA, unknown)


def test_unknown_keys_and_unserved_versions_are_refused() -> None:
    with pytest.raises(RequestFormatError):
        decode_request(3, b"")
    with pytest.raises(RequestFormatError):
        decode_response(3, b"")
    for key in KEYS:
        for version in (0, VERSIONS[key] - 1, VERSIONS[key] + 1):
            with pytest.raises(RequestFormatError, match="not served"):
                parse_request_frame(i16(key) + i16(version) + i32(1) + i16(-1) + TAGS)
    with pytest.raises(RequestFormatError):
        parse_request_frame(b"\x00\x04")
    with pytest.raises(RequestFormatError, match="client id"):
        parse_request_frame(i16(4) + i16(4) + i32(1) + i16(50) + b"abc")


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([decode_request, decode_response]), st.sampled_from(KEYS), st.binary(max_size=120))
def test_random_bytes_decode_or_raise_the_format_error(decode, key, body) -> None:
    try:
        decode(key, body)
    except RequestFormatError:
        pass


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL_BODIES), st.data())
def test_corrupted_bodies_decode_or_raise_the_format_error(case, data) -> None:
    decode, key, body = case
    corrupted = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        corrupted[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode(key, bytes(corrupted))
    except RequestFormatError:
        pass


@settings(max_examples=200)
@given(st.binary(max_size=40))
def test_random_request_frames_parse_or_raise_the_format_error(frame) -> None:
    try:
        parse_request_frame(frame)
    except RequestFormatError:
        pass
