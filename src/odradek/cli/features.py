"""``odradek features``: Kafka 4.4's kafka-features.sh (``org.apache.kafka.tools.FeatureCommand``) over the wire.

``describe`` asks the bootstrap broker with ApiVersions, as the admin client's describeFeatures does, and prints
one line per supported feature in Kafka's words (``Epoch: -`` while no finalized epoch is known). ``upgrade``,
``downgrade`` (``--unsafe`` for an unsafe one) and ``disable`` (a downgrade to 0) send UpdateFeatures to the
controller the cluster's metadata names, ``--dry-run`` as validate_only, and print per feature what Kafka's tool
prints; a failure ends with ``N out of M operation(s) failed.`` on stderr and exit status 1. ``--metadata``,
``--release-version`` and the ``version-mapping``/``feature-dependencies`` commands are not offered: they are about
``metadata.version``, which odradek (without KRaft) does not have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from odradek.admin import metadata, request_schema
from odradek.cli.security import command_config_option
from odradek.cli.security import connect as connect_to
from odradek.client import KafkaConnection
from odradek.errors import ErrorCode

API_VERSIONS, UPDATE_FEATURES = 18, 57
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3  # FeatureUpdate.UpgradeType's wire ids


@click.group("features")
@click.option("--bootstrap-server", required=True, help="A comma-separated list of host:port pairs.")
@command_config_option()
@click.pass_context
def features(ctx: click.Context, bootstrap_server: str, command_config: dict[str, str]) -> None:
    """This tool manages feature flags in Kafka."""
    ctx.obj = (bootstrap_server, command_config)


@features.command("describe")
@click.pass_obj
def describe(obj: tuple[str, Mapping[str, str]]) -> None:
    """Describes the current active feature flags."""
    bootstrap, properties = obj
    with connect_to(bootstrap, properties) as conn:
        version, cls, _ = request_schema(conn, API_VERSIONS, 4)
        answer = conn.request(API_VERSIONS, cls(client_software_name="odradek-cli", client_software_version="1"),
                              version)
    finalized = {f.name: int(f.max_version_level) for f in getattr(answer, "finalized_features", ())}
    epoch = int(getattr(answer, "finalized_features_epoch", -1))
    for feature in sorted(getattr(answer, "supported_features", ()), key=lambda f: f.name):
        click.echo(f"Feature: {feature.name:<40}  SupportedMinVersion: {int(feature.min_version):<15}  "
                   f"SupportedMaxVersion: {int(feature.max_version):<15}  "
                   f"FinalizedVersionLevel: {finalized.get(feature.name, 0):<15}  "
                   f"Epoch: {epoch if epoch >= 0 else '-'}")


def _parse(specs: Sequence[str], with_level: bool) -> dict[str, int]:
    updates: dict[str, int] = {}
    for spec in specs:
        if with_level:
            name, equals, level = spec.partition("=")
            if not equals:
                raise click.ClickException(f"Can't parse feature=level string {spec}: equals sign not found.")
            name, level = name.strip(), level.strip()
            try:
                value = int(level)
                if not -32768 <= value <= 32767:
                    raise ValueError(level)
            except ValueError:
                raise click.ClickException(f"Can't parse feature=level string {spec}: unable to parse {level} as "
                                           "a short.") from None
        else:
            name, value = spec, 0
        if name in updates:
            raise click.ClickException(f"Feature {name} was specified more than once.")
        updates[name] = value
    return updates


def _update(bootstrap: str, properties: Mapping[str, str], op: str, updates: Mapping[str, int], kind: int,
            dry_run: bool) -> None:
    if not updates:
        raise click.ClickException(f"You must specify at least one feature to {op}")
    with connect_to(bootstrap, properties) as conn:
        cluster = metadata(conn, [])
        controller = int(cluster.controller_id)
        brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in cluster.brokers}
    if controller not in brokers:
        raise click.ClickException("the cluster has no controller")
    with connect_to(brokers[controller], properties) as conn:
        answer = _send(conn, updates, kind, dry_run)
    results = {r.feature: (ErrorCode(r.error_code), r.error_message) for r in answer.results}
    top = ErrorCode(answer.error_code)
    failures = 0
    for name in sorted(updates):
        error, message = (top, answer.error_message) if top is not ErrorCode.none else results.get(
            name, (ErrorCode.unknown_server_error, "The server did not answer for this feature."))
        level = updates[name]
        if error is not ErrorCode.none:
            failures += 1
            what = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
            click.echo(f"{'Can not' if dry_run else 'Could not'} {what}. {message or error.name.upper()}")
        else:
            done = "disabled." if op == "disable" else f"{op}d to {level}."
            click.echo(f"{name}{' can be ' if dry_run else ' was '}{done}")
    if failures:
        raise click.ClickException(f"{failures} out of {len(updates)} operation(s) failed.")


def _send(conn: KafkaConnection, updates: Mapping[str, int], kind: int, dry_run: bool) -> Any:
    version, cls, module = request_schema(conn, UPDATE_FEATURES, 1)
    if version < 1:
        raise click.ClickException("the controller does not serve UpdateFeatures v1")
    return conn.request(UPDATE_FEATURES, cls(
        feature_updates=tuple(module.FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=kind)
                              for name, level in updates.items()),
        validate_only=dry_run), version)


@features.command("upgrade")
@click.option("--feature", "specs", multiple=True, help="A feature upgrade we should perform, in feature=level format.")
@click.option("--dry-run", is_flag=True, help="Validate this upgrade, but do not perform it.")
@click.pass_obj
def upgrade(obj: tuple[str, Mapping[str, str]], specs: tuple[str, ...], dry_run: bool) -> None:
    """Upgrade one or more feature flags."""
    _update(*obj, "upgrade", _parse(specs, True), UPGRADE, dry_run)


@features.command("downgrade")
@click.option("--feature", "specs", multiple=True,
              help="A feature downgrade we should perform, in feature=level format.")
@click.option("--unsafe", is_flag=True, help="Perform this downgrade even if it may irreversibly destroy metadata.")
@click.option("--dry-run", is_flag=True, help="Validate this downgrade, but do not perform it.")
@click.pass_obj
def downgrade(obj: tuple[str, Mapping[str, str]], specs: tuple[str, ...], unsafe: bool, dry_run: bool) -> None:
    """Downgrade one or more feature flags."""
    kind = UNSAFE_DOWNGRADE if unsafe else SAFE_DOWNGRADE
    _update(*obj, "downgrade", _parse(specs, True), kind, dry_run)


@features.command("disable")
@click.option("--feature", "specs", multiple=True, help="A feature flag to disable.")
@click.option("--unsafe", is_flag=True, help="Disable this feature flag even if it may irreversibly destroy metadata.")
@click.option("--dry-run", is_flag=True, help="Perform a dry-run of this disable operation.")
@click.pass_obj
def disable(obj: tuple[str, Mapping[str, str]], specs: tuple[str, ...], unsafe: bool, dry_run: bool) -> None:
    """Disable one or more feature flags. This is the same as downgrading the version to zero."""
    kind = UNSAFE_DOWNGRADE if unsafe else SAFE_DOWNGRADE
    _update(*obj, "disable", _parse(specs, False), kind, dry_run)
