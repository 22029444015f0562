"""kafka-configs (ConfigCommand) against odradek and Apache Kafka 3.9: topic configs, broker configs, user and client
quotas and SCRAM credentials, with equal output after normalisation."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from tools_support import CONFIGS, TOPICS, Pair

from brokers import wait_for

B = ("--bootstrap-server", "{bootstrap}")


def test_topic_configs(pair: Pair, topic: str) -> None:
    pair.same(TOPICS, *B, "--create", "--topic", topic, "--config", "retention.ms=1000")
    entity = ("--entity-type", "topics", "--entity-name", topic)
    assert "retention.ms=1000 sensitive=false" in pair.same(CONFIGS, *B, *entity, "--describe").stdout
    pair.same(CONFIGS, *B, *entity, "--alter", "--add-config",
              "cleanup.policy=compact,max.message.bytes=2000,segment.ms=100000")
    described = pair.same(CONFIGS, *B, *entity, "--describe").stdout
    assert "DEFAULT_CONFIG:message.max.bytes=1048588" in described
    pair.same(CONFIGS, *B, *entity, "--alter", "--delete-config", "retention.ms,segment.ms")
    assert "retention.ms" not in pair.same(CONFIGS, *B, *entity, "--describe").stdout
    pair.same(CONFIGS, *B, "--entity-type", "topics", "--entity-name", topic, "--alter", "--add-config",
              "no.such.config=1")
    pair.same(CONFIGS, *B, "--entity-type", "topics", "--entity-name", f"{topic}-missing", "--describe")


@pytest.mark.xfail(strict=True, reason="odradek's topics lack nine of Kafka 3.9's configs: "
                   "compression.gzip/lz4/zstd.level (KIP-390), local.retention.bytes/ms, remote.storage.enable, "
                   "remote.log.copy.disable, remote.log.delete.on.disable (tiered storage) and message.format.version "
                   "(docs/compatibility.md)")
def test_topic_configs_all(pair: Pair, topic: str) -> None:
    pair.same(TOPICS, *B, "--create", "--topic", topic)
    pair.same(CONFIGS, *B, "--entity-type", "topics", "--entity-name", topic, "--describe", "--all")


def test_broker_configs_describe(pair: Pair) -> None:
    pair.same(CONFIGS, *B, "--entity-type", "brokers", "--entity-name", "1", "--describe")
    pair.same(CONFIGS, *B, "--entity-type", "brokers", "--entity-default", "--describe")


@contextlib.contextmanager
def _broker_config(pair: Pair, entity: tuple[str, ...], name: str, value: str) -> Iterator[None]:
    """Set a dynamic broker config on both brokers and delete it again after, whatever happened: the Kafka broker is
    the session's, and a cluster default left behind shows in every later topic's description."""
    try:
        pair.same(CONFIGS, *B, *entity, "--alter", "--add-config", f"{name}={value}")
        # each broker applies it when the change notification reaches it, after the tool has its answer
        wait_for(lambda: all(f"{name}={value}" in out.stdout
                             for out in pair.run(CONFIGS, *B, *entity, "--describe").values()),
                 60, what=f"{name}={value} applied on both brokers")
        yield
    finally:
        pair.run(CONFIGS, *B, *entity, "--alter", "--delete-config", name)


def test_broker_configs_alter_per_broker(pair: Pair) -> None:
    entity = ("--entity-type", "brokers", "--entity-name", "1")
    with _broker_config(pair, entity, "log.cleaner.threads", "2"):
        pair.same(CONFIGS, *B, *entity, "--describe")


def test_broker_configs_alter_cluster_default(pair: Pair) -> None:
    entity = ("--entity-type", "brokers", "--entity-default")
    with _broker_config(pair, entity, "min.insync.replicas", "1"):
        pair.same(CONFIGS, *B, *entity, "--describe")


def test_user_and_client_quotas(pair: Pair, topic: str) -> None:
    user, client = f"user-{topic}", f"client-{topic}"
    pair.same(CONFIGS, *B, "--entity-type", "users", "--entity-name", user, "--alter", "--add-config",
              "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert pair.same(CONFIGS, *B, "--entity-type", "users", "--entity-name", user, "--describe").stdout == (
        f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n")
    pair.same(CONFIGS, *B, "--entity-type", "clients", "--entity-name", client, "--alter", "--add-config",
              "request_percentage=50")
    pair.same(CONFIGS, *B, "--entity-type", "clients", "--entity-name", client, "--describe")
    both = ("--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-name", client)
    pair.same(CONFIGS, *B, *both, "--alter", "--add-config", "producer_byte_rate=10")
    pair.same(CONFIGS, *B, *both, "--describe")
    default_user = ("--entity-type", "users", "--entity-default")
    try:  # a default quota throttles every user: taken away at once, the Kafka broker is the session's
        pair.same(CONFIGS, *B, *default_user, "--alter", "--add-config", "producer_byte_rate=4096000")
        pair.same(CONFIGS, *B, *default_user, "--describe")
    finally:
        pair.run(CONFIGS, *B, *default_user, "--alter", "--delete-config", "producer_byte_rate")
    assert pair.same(CONFIGS, *B, *default_user, "--describe").stdout == ""
    pair.same(CONFIGS, *B, "--entity-type", "clients", "--entity-name", client, "--alter", "--add-config",
              "no_such_quota=1")


def test_scram_credentials(pair: Pair, topic: str) -> None:
    user = f"scram-{topic}"
    entity = ("--entity-type", "users", "--entity-name", user)
    pair.same(CONFIGS, *B, *entity, "--alter", "--add-config",
              "SCRAM-SHA-256=[iterations=4096,password=secret],SCRAM-SHA-512=[password=other]")
    assert pair.same(CONFIGS, *B, *entity, "--describe").stdout == (
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=4096, "
        "SCRAM-SHA-512=iterations=4096\n")
    pair.same(CONFIGS, *B, *entity, "--alter", "--delete-config", "SCRAM-SHA-512")
    pair.same(CONFIGS, *B, *entity, "--describe")
