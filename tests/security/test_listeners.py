"""Listener settings as Kafka reads and refuses them, the JAAS parser, and a two-listener cluster's registrations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from security_helpers import PLAIN_JAAS

from brokers import wait_for
from odradek.broker.config import BROKER_DEFAULTS, BrokerConfig
from odradek.coordination import znodes as zn
from odradek.security.jaas import JaasError, parse_jaas, parse_one_module
from odradek.security.listeners import Listener, listener_config, listener_setting, rebind
from odradek.security.sasl import sasl_settings
from odradek.testing import start_cluster

DEFAULTS = {k: v for k, (_t, v) in BROKER_DEFAULTS.items()}


def test_without_listeners_host_and_port_make_one_plaintext_listener() -> None:
    config = listener_config(DEFAULTS, "127.0.0.1", 9092)
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),)
    assert config.advertised == config.listeners and config.inter_broker == "PLAINTEXT"


def test_listeners_map_names_to_protocols_and_pick_the_inter_broker_listener() -> None:
    values = {**DEFAULTS, "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://[::1]:9093",
              "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,EXTERNAL:PLAINTEXT",
              "inter.broker.listener.name": "INTERNAL", "security.inter.broker.protocol": "PLAINTEXT"}
    config = listener_config(values, "ignored", 1)
    assert [(lst.name, lst.host, lst.port, lst.protocol) for lst in config.listeners] == [
        ("INTERNAL", "127.0.0.1", 0, "SASL_PLAINTEXT"), ("EXTERNAL", "::1", 9093, "PLAINTEXT")]
    assert config.inter_broker == "INTERNAL"
    values = {**DEFAULTS, "listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:0",
              "security.inter.broker.protocol": "SASL_PLAINTEXT"}
    assert listener_config(values, "", 0).inter_broker == "SASL_PLAINTEXT"


@pytest.mark.parametrize(("values", "message"), [
    ({"listeners": "FOO://127.0.0.1:0"}, "no security protocol defined for listener FOO"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9092"}, "must have a different port"),
    ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://b:2"}, "must have a different name"),
    ({"listeners": "PLAINTEXT://127.0.0.1"}, "unable to parse"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "inter.broker.listener.name must be a listener name defined"),
    ({"listeners": "PLAINTEXT://127.0.0.1:0", "advertised.listeners": "SSL://h:1"}, "equal to or a subset"),
    ({"listeners": "PLAINTEXT://0.0.0.0:0"}, "nonroutable meta-address 0.0.0.0"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "no enum constant for security protocol"),
])
def test_bad_listener_settings_are_refused_as_kafka_refuses_them(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        listener_config({**DEFAULTS, **values}, "127.0.0.1", 0)


def test_listener_prefixed_settings_win_and_are_accepted_by_the_config() -> None:
    config = BrokerConfig.build(overrides={"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
                                           "sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    assert listener_setting(config.values, "SASL_PLAINTEXT", "sasl.enabled.mechanisms") == "PLAIN"
    assert listener_setting(config.values, "OTHER", "sasl.enabled.mechanisms") == "SCRAM-SHA-256"
    with pytest.raises(ValueError, match="unknown broker config"):
        BrokerConfig.build(overrides={"listener.name": "x"})


def test_rebind_replaces_ports_by_listener() -> None:
    text = "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://[::1]:0"
    assert rebind(text, lambda name, port: port + 1 if port else 7) == \
        "PLAINTEXT://127.0.0.1:9093,SASL_PLAINTEXT://[::1]:7"


def test_jaas_is_parsed_as_kafka_parses_it() -> None:
    module = parse_one_module(PLAIN_JAAS, "x")
    assert module.name == "org.apache.kafka.common.security.plain.PlainLoginModule" and module.flag == "required"
    assert module.users() == {"admin": "admin-secret", "alice": "alice-secret"}
    assert module.options["username"] == "admin"
    text = ('// a comment\n a.B REQUIRED /* inline */ user_x="p\\"q" user_y=bare;\n'
            'c.D optional;')
    modules = parse_jaas(text)
    assert [m.name for m in modules] == ["a.B", "c.D"] and modules[0].users() == {"x": 'p"q', "y": "bare"}
    with pytest.raises(ValueError, match="should be 1 module"):
        parse_one_module(text, "x")
    for bad in ("a.B required user_x=\"unterminated;", "a.B maybe;", "a.B required user_x;", "a.B required", ""):
        with pytest.raises(JaasError):
            parse_jaas(bad)


def test_sasl_listener_settings_are_checked_at_start_up() -> None:
    with pytest.raises(ValueError, match="GSSAPI is not supported"):
        sasl_settings(DEFAULTS, "SASL_PLAINTEXT", None)  # Kafka's default mechanism
    with pytest.raises(ValueError, match=r"listener\.name\.sasl_plaintext\.plain\.sasl\.jaas\.config"):
        sasl_settings({**DEFAULTS, "sasl.enabled.mechanisms": "PLAIN"}, "SASL_PLAINTEXT", None)
    settings = sasl_settings({**DEFAULTS, "sasl.enabled.mechanisms": "plain, SCRAM-SHA-512",
                              "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS},
                             "SASL_PLAINTEXT", None)
    assert settings.mechanisms == ("PLAIN", "SCRAM-SHA-512") and settings.plain_users["alice"] == "alice-secret"
    assert settings.failed_delay_ms == 100 and settings.reauth_ms == 0


def test_each_broker_registers_every_endpoint_with_its_protocol_map(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, brokers=2, overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    })
    try:
        async def registrations() -> dict[int, dict[str, object]]:
            broker = next(iter(cluster.cluster.brokers.values()))
            session = broker.membership.current()
            found = {}
            for broker_id in cluster.broker_ids:
                data, _ = await session.get(zn.broker_path(broker_id))
                found[broker_id] = json.loads(data)
            return found

        docs = cluster.call(registrations())
        for broker_id, doc in docs.items():
            broker = cluster.cluster.brokers[broker_id]
            plain, sasl = broker.advertised["PLAINTEXT"], broker.advertised["SASL_PLAINTEXT"]
            assert doc["endpoints"] == [f"PLAINTEXT://127.0.0.1:{plain[1]}", f"SASL_PLAINTEXT://127.0.0.1:{sasl[1]}"]
            assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT",
                                                             "SASL_PLAINTEXT": "SASL_PLAINTEXT"}
            assert doc["host"] == "127.0.0.1" and doc["port"] == plain[1] and plain[1] != sasl[1]
        # every broker's metadata cache knows every broker on both listeners (UpdateMetadata carries them all)
        def both_known() -> bool:
            return all(len(b.metadata.brokers_on(name)) == 2 for b in cluster.cluster.brokers.values()
                       for name in ("PLAINTEXT", "SASL_PLAINTEXT"))

        wait_for(lambda: cluster.run(both_known), 30, what="every broker on both listeners in every cache")
        # a restarted broker binds the same ports again (clients keep their bootstrap lists)
        before = cluster.run(lambda: dict(cluster.cluster.brokers[1].advertised))
        cluster.restart(1)
        assert cluster.run(lambda: dict(cluster.cluster.brokers[1].advertised)) == before
        assert cluster.cluster.bootstrap_on("SASL_PLAINTEXT").count(",") == 1
    finally:
        cluster.close()


def test_brokers_without_the_clients_listener_are_left_out() -> None:
    import uuid

    from odradek.broker.apis.metadata import topic_entry
    from odradek.broker.metadata import BrokerEndpoint, MetadataCache, PartitionMeta, TopicMeta
    from odradek.errors import ErrorCode

    cache = MetadataCache("c")
    cache.set_broker(BrokerEndpoint(0, "h0", 1, None, (("INTERNAL", "h0", 1), ("EXTERNAL", "e0", 9))))
    cache.set_broker(BrokerEndpoint(1, "h1", 2, None, (("INTERNAL", "h1", 2),)))
    assert [(b.broker_id, b.host, b.port) for b in cache.brokers_on("EXTERNAL")] == [(0, "e0", 9)]
    assert [b.broker_id for b in cache.brokers_on("INTERNAL")] == [0, 1]
    assert cache.endpoint_on(1, "EXTERNAL") is None and cache.endpoint_on(0, "EXTERNAL") == ("e0", 9)
    meta = TopicMeta("t", uuid.uuid4(), {0: PartitionMeta(0, 1, 0, [0, 1], [0, 1]),
                                         1: PartitionMeta(1, 0, 0, [0, 1], [0, 1])})
    reachable = {b.broker_id for b in cache.brokers_on("EXTERNAL")}
    for version, error in ((12, ErrorCode.listener_not_found), (5, ErrorCode.leader_not_available)):
        parts = topic_entry(meta, {0, 1}, reachable, version).partitions
        assert [(p.leader, p.error_code) for p in parts] == [(-1, int(error)), (0, 0)]
