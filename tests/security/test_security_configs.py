"""The security settings as a broker reports them: Kafka's names and defaults, passwords and keys never sent back."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka.admin import AdminClient, ConfigResource

from brokers import BrokerProcess
from kafka_clients import opened


def test_describe_configs_shows_defaults_and_hides_secrets(broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = broker_factory("--override", "ssl.key.password=very-secret", "--override", "max.connections.per.ip=50")
    admin = opened(AdminClient({"bootstrap.servers": broker.bootstrap}))
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(30)
    assert entries["ssl.key.password"].is_sensitive
    assert entries["ssl.key.password"].value is None
    assert "very-secret" not in repr({k: (e.value, e.is_sensitive) for k, e in entries.items()})
    assert entries["max.connections.per.ip"].value == "50"
    assert entries["max.connections"].value == "2147483647"
    assert entries["connections.max.idle.ms"].value == "600000"
    assert entries["ssl.client.auth"].value == "none"
    assert entries["ssl.endpoint.identification.algorithm"].value == "https"
    assert entries["ssl.enabled.protocols"].value == "TLSv1.2,TLSv1.3"
    assert entries["ssl.principal.mapping.rules"].value == "DEFAULT"
