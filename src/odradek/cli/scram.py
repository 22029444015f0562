"""``odradek configs --entity-type users``: SCRAM credentials as kafka-configs.sh manages them (KIP-554).

``--add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'``
sets credentials (iterations default to 4096, as ConfigCommand's), ``--delete-config SCRAM-SHA-512`` removes one,
``--describe`` prints ``SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192``.
Through AlterUserScramCredentials and DescribeUserScramCredentials, so the password never leaves this process
(the client salts and hashes it). ``--command-config`` (:mod:`odradek.cli.security`) reaches a cluster that is
reachable only over SASL or TLS.
"""

from __future__ import annotations

from typing import Any

import click

from odradek.cli.output import wait_result

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096


def parse_scram_value(mechanism: str, value: str) -> tuple[int, str]:
    """``iterations=8192,password=secret`` (iterations optional) → (iterations, password)."""
    fields: dict[str, str] = {}
    for part in value.split(","):
        name, sep, setting = part.partition("=")
        if not sep or name.strip() not in ("iterations", "password"):
            raise click.BadParameter(f"{mechanism}: expected [iterations=N,password=...], got {value!r}")
        fields[name.strip()] = setting
    if "password" not in fields:
        raise click.BadParameter(f"{mechanism}: password is required")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise click.BadParameter(f"{mechanism}: iterations must be a number") from None
    return iterations, fields["password"]


def _mechanism(name: str) -> Any:
    from confluent_kafka.admin import ScramMechanism

    if name not in SCRAM_MECHANISMS:
        raise click.BadParameter(f"{name} is not a SCRAM mechanism ({', '.join(SCRAM_MECHANISMS)}); user quotas are "
                                 f"not managed here")
    return ScramMechanism.SCRAM_SHA_256 if name == "SCRAM-SHA-256" else ScramMechanism.SCRAM_SHA_512


def alter_users(admin: Any, user: str, added: dict[str, str], deleted: list[str]) -> None:
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialDeletion, UserScramCredentialUpsertion

    changes: list[Any] = []
    for name, value in added.items():
        iterations, password = parse_scram_value(name, value)
        changes.append(UserScramCredentialUpsertion(user, ScramCredentialInfo(_mechanism(name), iterations),
                                                    password.encode()))
    changes += [UserScramCredentialDeletion(user, _mechanism(name)) for name in deleted]
    for future in admin.alter_user_scram_credentials(changes).values():
        wait_result(future)
    click.echo(f"Completed updating config for user {user}.")


def describe_users(admin: Any, user: str | None) -> None:
    if user is None:
        found = wait_result(admin.describe_user_scram_credentials())
    else:
        found = {u: wait_result(f) for u, f in admin.describe_user_scram_credentials([user]).items()}
    for name in sorted(found):
        infos = ", ".join(f"{i.mechanism.name.replace('_', '-')}=iterations={i.iterations}"
                          for i in found[name].scram_credential_infos)
        click.echo(f"SCRAM credential configs for user-principal '{name}' are {infos}")
