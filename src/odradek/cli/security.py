"""``--command-config``: one client properties file, read the same way by every odradek command that reaches brokers.

Kafka's tools take ``--command-config admin.properties`` (``security.protocol``, ``sasl.mechanism``,
``sasl.jaas.config``, ``ssl.*``); the console and perf tools also know it by Kafka's own names for them
(``--producer.config``, ``--consumer.config``, ``--admin.config``). The file is read and checked when the option is
parsed, so a bad file is a usage error before anything connects. Commands on odradek's own client connect with
:func:`connect`; those on confluent-kafka build their settings with :func:`rdkafka_config`, which translates the
file to librdkafka's names. A refused login or a failed TLS handshake ends the command with one line on stderr and
exit code 1 (:class:`SecuredGroup`), never a traceback.
"""

from __future__ import annotations

import ssl
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from odradek.cli.clients import closed_when_done
from odradek.client import KafkaConnection
from odradek.security.client_config import (
    ClientConfigError,
    client_security,
    librdkafka_properties,
    read_properties,
)
from odradek.security.sasl_client import AuthenticationFailed

F = TypeVar("F", bound=Callable[..., Any])
GIVEN = "odradek.command_config_given"


def _load(ctx: click.Context, param: click.Parameter, value: Path | None) -> dict[str, str]:
    if value is None:
        return {}
    ctx.meta[GIVEN] = True  # meta is shared by nested contexts: the group's error handler sees it
    try:
        properties = read_properties(value)
        client_security(properties)  # refuse an unusable file now, not at the first connection
    except ClientConfigError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    return properties


def command_config_option(*aliases: str) -> Callable[[F], F]:
    """``--command-config FILE`` (and Kafka's other names for it on this tool) as ``command_config``: a dict."""
    return click.option("--command-config", *aliases, "command_config", default=None, callback=_load,
                        type=click.Path(path_type=Path, exists=True, dir_okay=False),
                        help="client properties file (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.*)")


def connect(address: str, properties: Mapping[str, str], client_id: str = "odradek-cli") -> KafkaConnection:
    """odradek's own client to ``address``, secured as the properties say."""
    return KafkaConnection(address, client_id=client_id, security=client_security(properties))


def rdkafka_config(bootstrap: str, properties: Mapping[str, str], overrides: Sequence[str] = ()) -> dict[str, Any]:
    """librdkafka settings: bootstrap servers, the properties file translated, then ``name=value`` overrides (a
    tool's ``--producer-property`` wins over its config file, as in Kafka's tools)."""
    from odradek.cli.output import kafka_config

    config: dict[str, Any] = {"bootstrap.servers": bootstrap} if bootstrap else {}
    config.update(librdkafka_properties(properties))
    config.update({k: v for k, v in kafka_config(bootstrap, overrides).items() if k != "bootstrap.servers" or v})
    if properties:
        config["error_cb"] = _fail_on_refusal
    return config


def _fail_on_refusal(error: Any) -> None:
    """librdkafka retries a refused login for ever, reporting it only here (served by poll): a tool stops instead,
    as Kafka's do on an AuthenticationException (an SSL handshake failure is one too)."""
    from confluent_kafka import KafkaError

    if error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
        raise AuthenticationFailed(error.str())


def admin(bootstrap: str, properties: Mapping[str, str], overrides: Sequence[str] = (), timeout_s: float = 30.0) -> Any:
    """A confluent-kafka AdminClient. With a properties file it first makes sure it can log in: an admin
    request's future would otherwise wait out its whole timeout on a refused login, which only ``poll`` reports."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    client = closed_when_done(AdminClient(rdkafka_config(bootstrap, properties, overrides)))
    if not properties:
        return client
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.list_topics(timeout=0.5)
            return client
        except KafkaException:
            client.poll(0.1)  # raises AuthenticationFailed through _fail_on_refusal when that is why
            if time.monotonic() > deadline:
                raise click.ClickException(f"cannot reach {bootstrap} within {timeout_s:.0f} s") from None


class SecuredGroup(click.Group):
    """The ``odradek`` group: a refused login, a TLS failure or a dropped connection anywhere below is a one-line
    error (exit 1)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except AuthenticationFailed as exc:
            text = str(exc)
            raise click.ClickException(text if "authentication failed" in text.lower()
                                       else f"Authentication failed: {text}") from None
        except ssl.SSLError as exc:
            raise click.ClickException(f"TLS handshake failed: {exc}") from None
        except ClientConfigError as exc:
            raise click.ClickException(str(exc)) from None
        except ConnectionError as exc:
            hint = "" if ctx.meta.get(GIVEN) else " (a SASL or SSL listener needs --command-config)"
            raise click.ClickException(f"Connection to the broker failed: {exc or type(exc).__name__}{hint}") from None
        except click.ClickException:
            raise
        except Exception as exc:
            kafka = sys.modules.get("confluent_kafka")  # imported only by the commands that use it
            if kafka is None or not isinstance(exc, kafka.KafkaException):
                raise
            error = exc.args[0] if exc.args else exc
            raise click.ClickException(getattr(error, "str", lambda: str(error))()) from None
