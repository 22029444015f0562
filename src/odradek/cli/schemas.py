"""``odradek schemas``: list, show, register, check and delete schemas through a registry's REST API (odradek's or
Confluent's), in the shape of ``odradek topics``: one action flag, ``--subject``, ``--version``."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import click

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


def call(url: str, method: str, path: str, body: Any = None) -> Any:
    """One request; a registry error becomes a ClickException carrying Confluent's code and message."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                     headers={"Content-Type": MEDIA_TYPE, "Accept": MEDIA_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            error = json.loads(exc.read())
            raise click.ClickException(f"{error['message']} (error code {error['error_code']})") from None
        except (ValueError, KeyError, TypeError):
            raise click.ClickException(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise click.ClickException(f"cannot reach the schema registry at {url}: {exc.reason}") from None


def _schema_body(schema_file: Path | None, schema_type: str) -> dict[str, Any]:
    if schema_file is None:
        raise click.UsageError("--register and --check need --schema-file")
    body: dict[str, Any] = {"schema": schema_file.read_text()}
    if schema_type.upper() != "AVRO":
        body["schemaType"] = schema_type.upper()
    return body


@click.command("schemas")
@click.option("--schema-registry-url", "url", required=True, envvar="ODRADEK_SCHEMA_REGISTRY_URL")
@click.option("--list", "action", flag_value="list", help="subjects (with --subject: its versions)")
@click.option("--describe", "action", flag_value="describe", help="a subject's version (latest unless --version)")
@click.option("--register", "action", flag_value="register")
@click.option("--check", "action", flag_value="check", help="compatibility with the subject's versions")
@click.option("--delete", "action", flag_value="delete", help="a subject, or one --version of it")
@click.option("--subject", default=None)
@click.option("--version", "version", default=None, help="a version number or latest")
@click.option("--schema-file", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--schema-type", default="AVRO", show_default=True, type=click.Choice(["AVRO", "JSON", "PROTOBUF"],
                                                                                     case_sensitive=False))
@click.option("--permanent", is_flag=True, help="with --delete: a hard delete (after a soft one)")
@click.option("--deleted", is_flag=True, help="with --list: include soft-deleted subjects and versions")
def schemas(url: str, action: str | None, subject: str | None, version: str | None, schema_file: Path | None,
            schema_type: str, permanent: bool, deleted: bool) -> None:
    """List, show, register, check and delete schemas in a schema registry."""
    if action is None:
        raise click.UsageError("one of --list, --describe, --register, --check, --delete is required")
    if action == "list" and subject is None:
        for name in call(url, "GET", f"/subjects?deleted={str(deleted).lower()}"):
            click.echo(name)
        return
    if subject is None:
        raise click.UsageError(f"--{action} needs --subject")
    quoted = urllib.parse.quote(subject, safe="")
    if action == "list":
        for number in call(url, "GET", f"/subjects/{quoted}/versions?deleted={str(deleted).lower()}"):
            click.echo(number)
    elif action == "describe":
        found = call(url, "GET", f"/subjects/{quoted}/versions/{version or 'latest'}")
        click.echo(f"subject {found['subject']} version {found['version']} id {found['id']} "
                   f"type {found.get('schemaType', 'AVRO')}")
        for ref in found.get("references") or []:
            click.echo(f"reference {ref['name']} -> {ref['subject']} version {ref['version']}")
        click.echo(found["schema"])
    elif action == "register":
        registered = call(url, "POST", f"/subjects/{quoted}/versions", _schema_body(schema_file, schema_type))
        click.echo(f"Registered schema id {registered['id']} under {subject}.")
    elif action == "check":
        target = f"/versions/{version}" if version else "/versions"
        result = call(url, "POST", f"/compatibility/subjects/{quoted}{target}?verbose=true",
                      _schema_body(schema_file, schema_type))
        if not result["is_compatible"]:
            raise click.ClickException("incompatible: " + "; ".join(result.get("messages") or []))
        click.echo("compatible")
    else:
        flag = f"?permanent={str(permanent).lower()}"
        if version is not None:
            gone = call(url, "DELETE", f"/subjects/{quoted}/versions/{version}{flag}")
            click.echo(f"Deleted version {gone} of {subject}.")
        else:
            gone = call(url, "DELETE", f"/subjects/{quoted}{flag}")
            click.echo(f"Deleted {subject} versions {', '.join(map(str, gone))}.")
