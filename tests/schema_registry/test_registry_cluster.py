"""The registry on a real cluster: confluent-kafka's serializers round-trip records through the brokers, bad
input gets Confluent's error codes, and ids and versions survive a whole-cluster restart and a primary's failover."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from brokers import wait_for
from kafka_clients import opened
from odradek.schema_registry.server import SchemaRegistry
from odradek.testing import ThreadedCluster

pytestmark = pytest.mark.odradek(brokers=1)

USER_AVRO = json.dumps({"type": "record", "name": "User", "namespace": "odradek.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "favorite_number", "type": ["null", "int"], "default": None}]})
USER_JSON = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "User", "type": "object",
                        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                        "required": ["name"]})
USER_PROTO = """syntax = "proto3";
package odradek.test;
import "google/protobuf/timestamp.proto";
message User { string name = 1; int32 age = 2; google.protobuf.Timestamp joined = 3; }
"""


def _round_trip(bootstrap: str, topic: str, serializer: Any, deserializer: Any, value: Any) -> Any:
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = opened(Producer({"bootstrap.servers": bootstrap}))
    producer.produce(topic, value=serializer(value, ctx))
    assert producer.flush(30) == 0
    consumer = opened(Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                                "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    try:
        msg = wait_for(lambda: consumer.poll(0.5), 60, what=f"a record on {topic}")
        assert msg is not None and not msg.error()
        return deserializer(msg.value(), ctx)  # type: ignore[attr-defined]
    finally:
        consumer.close()


def test_avro_round_trip_through_the_brokers(odradek_cluster: ThreadedCluster) -> None:
    client = SchemaRegistryClient({"url": odradek_cluster.schema_registry_url})
    value = {"name": "Ada", "favorite_number": 7}
    got = _round_trip(odradek_cluster.bootstrap_servers, "users-avro", AvroSerializer(client, USER_AVRO),
                      AvroDeserializer(client), value)
    assert got == value
    latest = client.get_latest_version("users-avro-value")
    assert (latest.version, latest.schema.schema_type) == (1, "AVRO")


def test_json_schema_round_trip_through_the_brokers(odradek_cluster: ThreadedCluster) -> None:
    client = SchemaRegistryClient({"url": odradek_cluster.schema_registry_url})
    value = {"name": "Grace", "age": 85}
    got = _round_trip(odradek_cluster.bootstrap_servers, "users-json", JSONSerializer(USER_JSON, client),
                      JSONDeserializer(USER_JSON, schema_registry_client=client), value)
    assert got == value
    assert client.get_latest_version("users-json-value").schema.schema_type == "JSON"


@pytest.fixture
def user_pb2(tmp_path: Path) -> Iterator[Any]:
    """The User message compiled by protoc into a module, as an application would have it."""
    (tmp_path / "user.proto").write_text(USER_PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}", f"--python_out={tmp_path}",
                    str(tmp_path / "user.proto")], check=True)
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("user_pb2")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("user_pb2", None)


def test_protobuf_round_trip_through_the_brokers(odradek_cluster: ThreadedCluster, user_pb2: Any) -> None:
    client = SchemaRegistryClient({"url": odradek_cluster.schema_registry_url})
    value = user_pb2.User(name="Barbara", age=42)
    value.joined.seconds = 1_700_000_000
    got = _round_trip(odradek_cluster.bootstrap_servers, "users-proto",
                      ProtobufSerializer(user_pb2.User, client, {"use.deprecated.format": False}),
                      ProtobufDeserializer(user_pb2.User, {"use.deprecated.format": False}), value)
    assert got == value
    registered = client.get_latest_version("users-proto-value")
    assert registered.schema.schema_type == "PROTOBUF"
    # the text form of the same schema, registered by hand under BACKWARD, is compatible with it
    assert client.test_compatibility("users-proto-value", Schema(USER_PROTO, "PROTOBUF"))


def _http(url: str, method: str = "GET", body: bytes | None = None,
          content_type: str = "application/vnd.schemaregistry.v1+json") -> tuple[int, Any]:
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_bad_input_gets_confluents_error_codes(odradek_cluster: ThreadedCluster) -> None:
    url = odradek_cluster.schema_registry_url
    good = json.dumps({"schema": '"string"'}).encode()
    assert _http(f"{url}/subjects/s/versions", "POST", good) == (200, {"id": 1})
    cases = [
        (f"{url}/subjects/s/versions", "POST", json.dumps({"schema": '{"type":"recrd"}'}).encode(), 422, 42201),
        (f"{url}/subjects/s/versions", "POST", json.dumps({"schema": "{}", "schemaType": "XML"}).encode(),
         422, 42201),
        (f"{url}/subjects/nobody/versions", "GET", None, 404, 40401),
        (f"{url}/subjects/s/versions/9", "GET", None, 404, 40402),
        (f"{url}/subjects/s/versions/zero", "GET", None, 422, 42202),
        (f"{url}/schemas/ids/999", "GET", None, 404, 40403),
        (f"{url}/config", "PUT", json.dumps({"compatibility": "SIDEWAYS"}).encode(), 422, 42203),
        (f"{url}/config/s", "PUT", json.dumps({"compatibility": 3}).encode(), 422, 42203),
        (f"{url}/mode", "PUT", json.dumps({"mode": "WRITEONLY"}).encode(), 422, 42204),
        (f"{url}/subjects/s/versions", "POST", b'{"schema": ', 400, 400),
        (f"{url}/subjects/s/versions", "POST", b"[]", 400, 400),
        (f"{url}/subjects/s/versions", "POST", json.dumps({"schema": '"int"'}).encode(), 409, 409),
        (f"{url}/no/such/path", "GET", None, 404, 404),
    ]
    for target, method, body, status, code in cases:
        got_status, got = _http(target, method, body)
        assert (got_status, got["error_code"]) == (status, code), (target, body, got)
        assert isinstance(got["message"], str) and "Traceback" not in got["message"]
    status, got = _http(f"{url}/subjects/s/versions", "POST", good, content_type="text/plain")
    assert (status, got["error_code"]) == (415, 415)


def test_an_oversize_body_gets_413(odradek_cluster: ThreadedCluster) -> None:
    bootstrap = odradek_cluster.bootstrap_servers

    async def start() -> SchemaRegistry:
        registry = SchemaRegistry(bootstrap, max_body_bytes=4096)
        await registry.start()
        return registry

    registry = odradek_cluster.call(start())
    try:
        body = json.dumps({"schema": json.dumps({"type": "enum", "name": "E",
                                                 "symbols": [f"S{i}" for i in range(2000)]})}).encode()
        status, got = _http(f"{registry.url}/subjects/big/versions", "POST", body)
        assert (status, got["error_code"]) == (413, 413)
    finally:
        odradek_cluster.call(registry.stop())


def _register_all(client: SchemaRegistryClient) -> dict[tuple[str, int], int]:
    client.set_compatibility("people", "NONE")
    for text in ('"string"', '"int"', USER_AVRO):
        client.register_schema("people", Schema(text, "AVRO"))
    client.register_schema("others", Schema('"int"', "AVRO"))
    client.delete_version("people", 1)
    return {(s, v): client.get_version(s, v).schema_id for s in client.get_subjects()
            for v in client.get_versions(s)}


def test_ids_and_versions_survive_a_whole_cluster_restart(odradek_cluster: ThreadedCluster) -> None:
    before = _register_all(SchemaRegistryClient({"url": odradek_cluster.schema_registry_url}))
    assert before == {("people", 2): 2, ("people", 3): 3, ("others", 1): 2}
    odradek_cluster.call(odradek_cluster._registry.stop())  # type: ignore[union-attr]
    odradek_cluster._registry = None
    for broker_id in odradek_cluster.broker_ids:
        odradek_cluster.stop_broker(broker_id)
    for broker_id in odradek_cluster.broker_ids:
        odradek_cluster.start_broker(broker_id)
    client = SchemaRegistryClient({"url": odradek_cluster.schema_registry_url})  # a new registry, read from _schemas
    after = {(s, v): client.get_version(s, v).schema_id for s in client.get_subjects() for v in client.get_versions(s)}
    assert after == before
    assert client.get_compatibility("people") == "NONE"
    assert client.register_schema("new", Schema('"bytes"', "AVRO")) == 4  # the next id, not a reused one


@pytest.mark.odradek(brokers=3)  # _schemas replicated three times, as Confluent's registry makes it
def test_writes_are_forwarded_to_the_primary_and_survive_its_failover(odradek_cluster: ThreadedCluster) -> None:
    bootstrap = odradek_cluster.bootstrap_servers

    async def start() -> SchemaRegistry:
        registry = SchemaRegistry(bootstrap)
        await registry.start()
        return registry

    first, second = odradek_cluster.call(start()), odradek_cluster.call(start())
    try:
        wait_for(lambda: first.election.is_primary or second.election.is_primary,  # type: ignore[union-attr]
                 60, what="a primary")
        primary, other = (first, second) if first.election.is_primary else (second, first)  # type: ignore[union-attr]
        through_other = SchemaRegistryClient({"url": other.url})
        before = _register_all(through_other)  # every write forwarded to the primary
        assert SchemaRegistryClient({"url": primary.url}).get_versions("people") == [2, 3]
        odradek_cluster.call(primary.stop())
        wait_for(lambda: other.election.is_primary, 60, what="the other instance to become primary")  # type: ignore[union-attr]
        assert {(s, v): through_other.get_version(s, v).schema_id for s in through_other.get_subjects()
                for v in through_other.get_versions(s)} == before
        assert through_other.register_schema("new", Schema('"bytes"', "AVRO")) == 4
    finally:
        for registry in (first, second):
            odradek_cluster.call(registry.stop())


def test_arbitrary_bodies_never_get_a_500(odradek_cluster: ThreadedCluster) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    url = odradek_cluster.schema_registry_url
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)
    schema_text = st.sampled_from(['"string"', "{}", '{"type":"record"}', "syntax = \"proto3\";", "[]", ""])
    bodies = values | st.fixed_dictionaries({"schema": schema_text}, optional={
        "schemaType": st.sampled_from(["AVRO", "JSON", "PROTOBUF", "avro", "XML", 3]),
        "references": values, "id": values, "version": values, "compatibility": values, "mode": values})
    targets = st.sampled_from([("POST", "/subjects/f/versions"), ("POST", "/subjects/f"),
                               ("POST", "/compatibility/subjects/f/versions/latest"), ("PUT", "/config/f"),
                               ("PUT", "/mode/f"), ("DELETE", "/subjects/f/versions/latest"),
                               ("GET", "/schemas/ids/x")])

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(targets, bodies)
    def check(target: tuple[str, str], body: Any) -> None:
        method, path = target
        status, answer = _http(url + path, method, None if method in ("GET", "DELETE") else json.dumps(body).encode())
        assert status < 500, (target, body, answer)
        if status >= 400:
            assert isinstance(answer["error_code"], int) and isinstance(answer["message"], str)

    check()
