"""What every format module gives back: a parsed schema (its stored and normalized text, and compatibility with
another schema of its format), and the resolved references it is parsed with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Dependency:
    """A reference resolved: the name the schema imports it by, its format and text, and its own dependencies."""

    name: str
    schema: str
    dependencies: tuple[Dependency, ...] = ()


class Parsed(Protocol):
    def canonical(self) -> str:
        """The text stored and matched on lookup."""

    def normalized(self) -> str:
        """The text under ``normalize=true``: equal for schemas that differ only in form."""

    def incompatibilities(self, writer: Parsed) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema (empty: it can)."""
