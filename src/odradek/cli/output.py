"""What the Kafka-style tools print through: borderless column tables, stderr progress bars, client construction.

Kafka's tools print whitespace-aligned columns that operators pipe into ``awk``; a rich table without a box prints
exactly that (styled only on a terminal), sized to its content so nothing is wrapped or cut at 80 columns when
stdout is a pipe. Progress bars go to stderr, so stdout keeps only what Kafka's tool would print there.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from odradek.cli.options import key_values

MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Columns as Kafka's tools align them: a header line, then one line per row, no borders, no trailing blanks."""
    cells = [[MISSING if c is None else str(c) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    buffer = io.StringIO()
    console = Console(file=buffer, width=sum(widths) + 2 * len(widths) + 1, color_system=None, highlight=False)
    table = Table(box=None, pad_edge=False, show_edge=False, header_style=None, padding=(0, 1))
    for h in headers:
        table.add_column(h, no_wrap=True, overflow="ignore")
    for row in cells:
        table.add_row(*(Text(c) for c in row))
    console.print(table)
    for line in buffer.getvalue().splitlines():
        click.echo(line.rstrip())


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False)


def progress(transient: bool = True) -> Progress:
    """A progress bar on stderr; on a pipe it stays quiet (no terminal to redraw)."""
    console = stderr_console()
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=transient, disable=not console.is_terminal, redirect_stdout=False,
        redirect_stderr=False,
    )


def echo_beside(bar: Progress, line: str) -> None:
    """A stdout line while ``bar`` may be drawn: above the bar when both share the terminal, else plainly."""
    if bar.live.is_started and sys.stdout.isatty():
        bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
    else:
        click.echo(line)


def kafka_config(bootstrap: str, properties: Sequence[str] = ()) -> dict[str, Any]:
    """librdkafka settings: the bootstrap servers and any ``--*-property name=value`` given."""
    return {"bootstrap.servers": bootstrap, **key_values(properties)}


def wait_result(future: Any, timeout: float = 30.0) -> Any:
    """A confluent-kafka future's result; a KafkaException becomes a one-line CLI error with Kafka's code name."""
    from confluent_kafka import KafkaException

    try:
        return future.result(timeout)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        name = getattr(error, "name", lambda: "")()
        text = getattr(error, "str", lambda: str(error))()
        raise click.ClickException(f"{name}: {text}" if name else text) from None
