"""``odradek configs`` round trips and the console producer and consumer, against a real broker."""

from __future__ import annotations

from collections.abc import Callable

from click.testing import Result
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType

from kafka_clients import opened
from odradek.cli.configs import parse_add_config
from odradek.testing import ThreadedCluster


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def overrides(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's dynamic configs as a client reads them back (not through the tool under test)."""
    admin = opened(AdminClient({"bootstrap.servers": bootstrap}))
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {e.name: e.value for e in entries.values() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def test_configs_alter_and_describe_round_trip(
    cluster: ThreadedCluster, cli: Callable[..., Result], name: str,
) -> None:
    bootstrap = cluster.bootstrap
    create(bootstrap, name)
    empty = cli("configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "topics",
                "--entity-name", name)
    assert empty.exit_code == 0, empty.output
    assert empty.stdout.splitlines() == [f"Dynamic configs for topic {name} are:"]

    added = cli("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "topics", "--entity-name",
                name, "--add-config", "retention.ms=12345,cleanup.policy=[compact,delete]")
    assert added.exit_code == 0, added.output
    assert added.stdout.strip() == f"Completed updating config for topic {name}."
    assert overrides(bootstrap, name) == {"retention.ms": "12345", "cleanup.policy": "compact,delete"}
    shown = cli("configs", "--bootstrap-server", bootstrap, "--describe", "--topic", name).stdout.splitlines()
    assert shown[0] == f"Dynamic configs for topic {name} are:"
    assert any(line.startswith("  retention.ms=12345 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=12345")
               for line in shown)
    assert any(line.startswith("  cleanup.policy=compact,delete sensitive=false") for line in shown)

    deleted = cli("configs", "--bootstrap-server", bootstrap, "--alter", "--topic", name,
                  "--delete-config", "retention.ms")
    assert deleted.exit_code == 0, deleted.output
    assert overrides(bootstrap, name) == {"cleanup.policy": "compact,delete"}

    bad = cli("configs", "--bootstrap-server", bootstrap, "--alter", "--topic", name, "--add-config",
              "retention.ms=soon")
    assert bad.exit_code == 1 and "INVALID_CONFIG" in bad.output
    assert overrides(bootstrap, name) == {"cleanup.policy": "compact,delete"}


def test_configs_brokers(cluster: ThreadedCluster, cli: Callable[..., Result]) -> None:
    bootstrap = cluster.bootstrap
    every = cli("configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers",
                "--entity-name", "0", "--all")
    assert every.exit_code == 0, every.output
    lines = every.stdout.splitlines()
    assert lines[0] == "All configs for broker 0 are:"
    assert any(line.startswith("  broker.id=0 sensitive=false") for line in lines)
    refused = cli("configs", "--bootstrap-server", bootstrap, "--alter", "--broker", "0", "--add-config",
                  "num.partitions=5")
    assert refused.exit_code == 1 and "INVALID_REQUEST" in refused.output
    assert "Cannot update these configs dynamically: Set(num.partitions)" in refused.output
    try:  # a dynamic broker config (KIP-226) is taken and described as this broker's own
        altered = cli("configs", "--bootstrap-server", bootstrap, "--alter", "--broker", "0", "--add-config",
                      "log.cleaner.threads=2")
        assert altered.exit_code == 0, altered.output
        described = cli("configs", "--bootstrap-server", bootstrap, "--describe", "--broker", "0", "--all")
        assert "  log.cleaner.threads=2 sensitive=false" in described.stdout, described.stdout
    finally:
        cli("configs", "--bootstrap-server", bootstrap, "--alter", "--broker", "0", "--delete-config",
            "log.cleaner.threads")


def test_parse_add_config_brackets() -> None:
    assert parse_add_config("a=1,b=[x,y],c=3") == {"a": "1", "b": "x,y", "c": "3"}
    assert parse_add_config("b=[x,y]") == {"b": "x,y"}


def test_produce_then_consume_with_keys(cluster: ThreadedCluster, cli: Callable[..., Result], name: str) -> None:
    bootstrap = cluster.bootstrap
    create(bootstrap, name)
    lines = [f"user-{i % 3}:event {i}: with a colon" for i in range(20)]
    sent = cli("produce", "--bootstrap-server", bootstrap, "--topic", name, "--property", "parse.key=true",
               "--property", "key.separator=:", input="\n".join(lines) + "\n")
    assert sent.exit_code == 0, sent.output

    got = cli("consume", "--bootstrap-server", bootstrap, "--topic", name, "--from-beginning", "--max-messages",
              "20", "--timeout-ms", "20000", "--property", "print.key=true", "--property", "key.separator=:")
    assert got.exit_code == 0, got.output
    assert got.stdout.splitlines() == lines  # key, separator, value: the producer's input again
    assert "Processed a total of 20 messages" in got.stderr

    plain = cli("consume", "--bootstrap-server", bootstrap, "--topic", name, "--partition", "0", "--offset", "18",
                "--max-messages", "2", "--timeout-ms", "20000", "--property", "print.offset=true")
    assert plain.stdout.splitlines() == ["Offset:18\tevent 18: with a colon", "Offset:19\tevent 19: with a colon"]

    no_key = cli("produce", "--bootstrap-server", bootstrap, "--topic", name, "--property", "parse.key=true",
                 "--property", "key.separator=:", input="k:v\nno separator here\n")
    assert no_key.exit_code == 1
    assert "No key separator found on line number 2: 'no separator here'" in no_key.output


def test_consume_with_a_group_commits_where_it_stopped(
    cluster: ThreadedCluster, cli: Callable[..., Result], name: str,
) -> None:
    bootstrap, group = cluster.bootstrap, f"g-{name}"
    create(bootstrap, name)
    cli("produce", "--bootstrap-server", bootstrap, "--topic", name, input="".join(f"m{i}\n" for i in range(6)))
    first = cli("consume", "--bootstrap-server", bootstrap, "--topic", name, "--group", group, "--from-beginning",
                "--max-messages", "4", "--timeout-ms", "20000")
    assert first.stdout.splitlines() == ["m0", "m1", "m2", "m3"]
    rest = cli("consume", "--bootstrap-server", bootstrap, "--topic", name, "--group", group,
               "--max-messages", "2", "--timeout-ms", "20000")
    assert rest.stdout.splitlines() == ["m4", "m5"]
