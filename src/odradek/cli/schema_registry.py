"""``odradek schema-registry``: the schema registry alone, against any Kafka cluster (Apache Kafka's too), and the
``--schema-registry-port`` option ``odradek up`` and ``odradek broker`` share.

``--schema-registry-port`` takes a port, ``0`` for a free one, or ``none`` for no registry. ``odradek up`` serves
one by default: on 8081 (Confluent's port) beside a broker on Kafka's 9092, and on a free port beside a broker on
any other port (so brokers started on chosen or free ports, side by side, never contend for 8081).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from odradek.cli.security import command_config_option, rdkafka_config

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_PORT = 8081
KAFKA_PORT = 9092


def _port(value: str | None) -> int | None:
    if value is None or value.lower() == "none":
        return None
    try:
        port = int(value)
    except ValueError:
        raise click.BadParameter(f"a port, 0 or none; not {value!r}") from None
    if not 0 <= port <= 65535:
        raise click.BadParameter(f"a port is 0..65535, not {port}")
    return port


def schema_registry_port_option(default: str | None) -> Callable[[F], F]:
    """``--schema-registry-port``; ``default`` None (on ``up``) leaves the choice to :func:`resolve_port`."""
    return click.option("--schema-registry-port", "schema_registry_port", default=default,
                        help="serve the schema registry here: a port, 0 for a free one, or none")


def resolve_port(value: str | None, broker_port: int) -> int | None:
    """What ``odradek up`` serves the registry on: the option, else 8081 beside 9092 and a free port otherwise."""
    if value is None:
        return DEFAULT_PORT if broker_port == KAFKA_PORT else 0
    return _port(value)


def broker_port(value: str | None) -> int | None:
    return _port(value)


@click.command("schema-registry")
@click.option("--bootstrap-server", "bootstrap", required=True, envvar="ODRADEK_BOOTSTRAP")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="0 picks a free port")
@click.option("--topic", default="_schemas", show_default=True, help="the topic schemas are kept in")
@click.option("--ready-file", default=None, type=click.Path(path_type=Path))
@click.option("--log-level", default="INFO", show_default=True)
@click.option("--basic-auth", is_flag=True,
              help="require HTTP Basic credentials that log in to the cluster with SCRAM (needs a SASL "
                   "security.protocol in --command-config)")
@click.option("--ssl-config", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="serve HTTPS: a properties file with Kafka's ssl.* names (PEM key store; a trust store for "
                   "forwarding between instances and, with ssl.client.auth, for clients)")
@command_config_option()
def schema_registry(bootstrap: str, host: str, port: int, topic: str, ready_file: Path | None, log_level: str,
                    basic_auth: bool, ssl_config: Path | None, command_config: dict[str, str]) -> None:
    """Serve Confluent's Schema Registry API for a cluster, schemas kept in its ``_schemas`` topic."""
    from odradek import event_loop
    from odradek.runner import configure_logging, serve_until_signal
    from odradek.schema_registry.server import SchemaRegistry

    configure_logging(log_level)
    config = {k: v for k, v in rdkafka_config(bootstrap, command_config).items() if k != "bootstrap.servers"}
    auth = _scram_basic_auth(bootstrap, command_config) if basic_auth else None
    server_tls, forward_tls = _tls(ssl_config) if ssl_config is not None else (None, None)

    async def run() -> None:
        registry = SchemaRegistry(bootstrap, host=host, port=port, client_config=config, topic=topic,
                                  basic_auth=auth, ssl_context=server_tls)
        registry.registry.forward_ssl = forward_tls
        try:
            await registry.start()
        except Exception as exc:  # the port taken; the cluster not reached in time
            await registry.stop()
            reason = str(exc) or repr(exc)
            raise click.ClickException(f"cannot serve the schema registry on {host}:{port}: {reason}") from exc
        await serve_until_signal({"schema.registry.url": registry.url}, ready_file, registry.stop)

    event_loop.run(run())


def _scram_basic_auth(bootstrap: str, properties: dict[str, str]) -> Any:
    """Basic credentials checked as SCRAM logins to the first bootstrap broker, over the properties' protocol."""
    from odradek.clock import SystemClock
    from odradek.schema_registry.basic_auth import ScramBasicAuth
    from odradek.security.client_config import client_ssl_context

    protocol = properties.get("security.protocol", "PLAINTEXT").upper()
    if not protocol.startswith("SASL"):
        raise click.UsageError("--basic-auth checks passwords as SCRAM logins: --command-config must set "
                               "security.protocol=SASL_PLAINTEXT or SASL_SSL")
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    context = client_ssl_context(properties) if protocol == "SASL_SSL" else None
    return ScramBasicAuth(host, int(port), protocol, SystemClock(), context)


def _tls(path: Path) -> tuple[Any, Any]:
    """The server context from the file's ``ssl.*`` (as a broker's listener builds it), and the client context
    forwarding uses (its trust store, or the system's when it names none)."""
    from odradek.security.client_config import read_properties
    from odradek.security.tls import TLS_DEFAULTS, TlsConfigError, TlsSettings, client_context, server_context

    props = read_properties(path)
    settings = TlsSettings.resolve(lambda name: props.get(name, TLS_DEFAULTS[name][1]))
    try:
        return server_context(settings), client_context(settings)
    except TlsConfigError as exc:
        raise click.UsageError(f"{path}: {exc}") from None
