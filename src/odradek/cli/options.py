"""Option values the commands share the parsing of."""

from __future__ import annotations

from collections.abc import Iterable

import click


def key_values(items: Iterable[str]) -> dict[str, str]:
    """``name=value`` options (``--override``, ``--config``, ``--*-property``) as a dict; a value without ``=`` is a
    usage error naming it."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected key=value, got {item!r}")
        out[name.strip()] = value.strip()
    return out
