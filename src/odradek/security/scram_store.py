"""SCRAM credentials where Kafka keeps them: ``/config/users/<sanitized user>``, as
``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}``.

The same znode holds the user's quotas (``producer_byte_rate``, ...), written by others: a change reads the node,
replaces only the SCRAM keys and writes it back with a version check (retrying when someone wrote in between), then
announces ``/config/changes/config_change_<seq>`` ``{"version":2,"entity_path":"users/<user>"}`` as Kafka's
AdminZkClient does. The user's name in the path is Kafka's Sanitizer encoding (URL encoding with ``*`` as ``%2A``
and a space as ``%20``). Brokers read the credential on each authentication, so a change applies to the next one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

from odradek.coordination import BadVersionError, NodeExistsError, NoNodeError, Session
from odradek.coordination import znodes as zn
from odradek.security.scram import MECHANISMS, ScramCredential, ScramFormatError

CONFIG_USERS = "/config/users"
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: what a user's name looks like as a znode name."""
    return "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in name)


def desanitize(name: str) -> str:
    return unquote(name)


def user_config_path(user: str) -> str:
    return f"{CONFIG_USERS}/{sanitize(user)}"


def _config_of(data: bytes, path: str) -> dict[str, str]:
    try:
        doc = json.loads(data) if data else {}
    except ValueError:
        raise ScramFormatError(f"{path}: not JSON") from None
    config = doc.get("config", {}) if isinstance(doc, dict) else {}
    if not isinstance(config, dict):
        raise ScramFormatError(f"{path}: 'config' is not an object")
    return {str(k): str(v) for k, v in config.items()}


async def read_user_config(session: Session, user: str) -> tuple[dict[str, str], int | None]:
    """The user's config and the znode's version (None: no znode)."""
    path = user_config_path(user)
    try:
        data, stat = await session.get(path)
    except NoNodeError:
        return {}, None
    return _config_of(data, path), stat.version


async def read_credential(session: Session, mechanism: str, user: str) -> ScramCredential | None:
    config, _version = await read_user_config(session, user)
    text = config.get(mechanism)
    return ScramCredential.from_string(text) if text else None


async def describe_credentials(session: Session, users: Iterable[str] | None) -> dict[str, dict[str, int]]:
    """``user -> {mechanism: iterations}`` for the given users (every user with a znode when None); users
    without any SCRAM credential are left out."""
    if users is None:
        try:
            users = [desanitize(child) for child in await session.children(CONFIG_USERS)]
        except NoNodeError:
            users = []
    found: dict[str, dict[str, int]] = {}
    for user in users:
        config, _version = await read_user_config(session, user)
        creds = {m: ScramCredential.from_string(config[m]).iterations for m in MECHANISMS if config.get(m)}
        if creds:
            found[user] = creds
    return found


async def alter_credentials(session: Session, user: str, upserts: Mapping[str, ScramCredential],
                            deletions: Iterable[str]) -> None:
    """Set and remove this user's SCRAM credentials, keeping every other key of the znode."""
    path = user_config_path(user)
    removed = set(deletions)
    while True:
        config, version = await read_user_config(session, user)
        for mechanism in removed:
            config.pop(mechanism, None)
        for mechanism, credential in upserts.items():
            config[mechanism] = credential.to_string()
        data = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
        try:
            if version is None:
                await session.create(path, data, make_parents=True)
            else:
                await session.set(path, data, expected_version=version)
            break
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # someone else wrote the user's config meanwhile: read it again
    await session.create(zn.CONFIG_CHANGE_PREFIX, zn.ConfigChangeNotification(f"users/{sanitize(user)}").to_json(),
                         sequential=True, make_parents=True)
