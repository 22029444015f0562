"""``odradek configs`` for client quotas (kafka-configs.sh's users and clients), against a real broker; what it
wrote is read back through DescribeClientQuotas, not through the tool under test."""

from __future__ import annotations

from collections.abc import Callable

from click.testing import Result

from odradek import admin
from odradek.client import KafkaConnection
from odradek.testing import ThreadedCluster


def stored(bootstrap: str) -> list[tuple[admin.QuotaEntityParts, dict[str, float]]]:
    with KafkaConnection(bootstrap) as conn:
        return admin.describe_client_quotas(conn, [])


def test_quota_configs_alter_and_describe(cluster: ThreadedCluster, cli: Callable[..., Result], name: str) -> None:
    bootstrap = cluster.bootstrap
    client, user = f"{name}-app", f"{name}-user"

    def configs(*args: str) -> Result:
        return cli("configs", "--bootstrap-server", bootstrap, *args)

    done = configs("--alter", "--entity-type", "clients", "--entity-name", client,
                   "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == f"Completed updating config for client {client}."
    assert ([("client-id", client)], {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}) in stored(bootstrap)

    done = configs("--alter", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients",
                   "--entity-default", "--add-config", "request_percentage=25")
    assert done.exit_code == 0, done.output
    assert ([("user", user), ("client-id", None)], {"request_percentage": 25.0}) in stored(bootstrap)

    done = configs("--alter", "--entity-type", "users", "--entity-default", "--add-config", "producer_byte_rate=99")
    assert done.exit_code == 0, done.output
    assert done.stdout.strip() == "Completed updating default config for users in the cluster."

    shown = configs("--describe", "--entity-type", "clients", "--entity-name", client)
    assert shown.stdout.splitlines() == [
        f"Quota configs for client-id '{client}' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0"]
    shown = configs("--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients")
    assert shown.stdout.splitlines() == [
        f"Quota configs for user-principal '{user}', the default client-id are request_percentage=25.0"]
    shown = configs("--describe", "--entity-type", "users", "--entity-default")
    assert shown.stdout.splitlines() == ["Quota configs for the default user-principal are producer_byte_rate=99.0"]

    done = configs("--alter", "--entity-type", "clients", "--entity-name", client, "--delete-config",
                   "consumer_byte_rate")
    assert done.exit_code == 0, done.output
    assert ([("client-id", client)], {"producer_byte_rate": 1024.0}) in stored(bootstrap)

    refused = configs("--alter", "--entity-type", "clients", "--entity-name", client, "--delete-config",
                      "consumer_byte_rate")
    assert refused.exit_code == 1 and "Invalid config(s): consumer_byte_rate" in refused.output
    refused = configs("--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", "retention.ms=1")
    assert refused.exit_code == 2 and "Only quota configs can be added for 'clients'" in refused.output
    refused = configs("--alter", "--entity-type", "clients", "--entity-name", client, "--add-config",
                      "producer_byte_rate=1.5")
    assert refused.exit_code == 1 and "INVALID_REQUEST: Configuration producer_byte_rate must be a LONG value" in (
        refused.output)
    refused = configs("--alter", "--entity-type", "users", "--entity-type", "clients", "--entity-name", client,
                      "--add-config", "producer_byte_rate=1")
    assert refused.exit_code == 2 and "must be specified with each --entity-type" in refused.output
    assert ([("client-id", client)], {"producer_byte_rate": 1024.0}) in stored(bootstrap)


def test_users_carry_quotas_and_scram_credentials(
    cluster: ThreadedCluster, cli: Callable[..., Result], name: str,
) -> None:
    """A lone users entity takes quota keys or SCRAM credentials, never both at once (ConfigCommand's split), and
    --describe lists both; neither change drops the other's keys from the shared znode."""
    bootstrap = cluster.bootstrap

    def configs(*args: str) -> Result:
        return cli("configs", "--bootstrap-server", bootstrap, *args)

    user = ("--entity-type", "users", "--entity-name", name)
    assert configs("--alter", *user, "--add-config", "SCRAM-SHA-256=[iterations=4096,password=pw]").exit_code == 0
    assert configs("--alter", *user, "--add-config", "producer_byte_rate=2048").exit_code == 0
    shown = configs("--describe", *user).stdout.splitlines()
    assert shown == [f"Quota configs for user-principal '{name}' are producer_byte_rate=2048.0",
                     f"SCRAM credential configs for user-principal '{name}' are SCRAM-SHA-256=iterations=4096"]

    both = configs("--alter", *user, "--add-config", "producer_byte_rate=1,SCRAM-SHA-512=[password=pw]")
    assert both.exit_code == 2 and "Cannot alter both quota and SCRAM credential configs" in both.output
    default = configs("--alter", "--entity-type", "users", "--entity-default", "--add-config",
                      "SCRAM-SHA-512=[password=pw]")
    assert default.exit_code == 2 and "--entity-default or --user-defaults is not allowed" in default.output
    assert configs("--describe", *user).stdout.splitlines() == shown
