"""Command output that reads well on a terminal, in a pipe or a log, and as JSON.

On a terminal a rich ``Table`` prints as is. When stdout is not a terminal (``| cat``, a log file, a
ticket) nothing is centred or padded to a console width: the title is a plain line, a table whose
natural width fits in ``PIPE_WIDTH`` columns is drawn at that width, and a wider one is listed one
field per line (``  column: value``) under its first column, so no line is longer than ``PIPE_WIDTH``
unless a single value is. ``--format json`` prints the same rows as JSON objects (``table_rows``).
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Any

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

#: Longest line written when stdout is not a terminal (unless a single value is longer).
PIPE_WIDTH = 120


class OutputFormat(StrEnum):
    """``--format`` of the read-only commands."""

    text = "text"
    json = "json"


def is_terminal(console: Console) -> bool:
    """True when ``console`` writes to a terminal (rich's own test, which honours FORCE_TERMINAL)."""
    return console.is_terminal


def _plain(cell: Any) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(str(cell)).plain


def table_rows(table: Table) -> list[dict[str, str]]:
    """The table's rows as ``{column header: plain cell text}`` (markup removed)."""
    headers = [_plain(c.header) for c in table.columns]
    columns = [[_plain(cell) for cell in c.cells] for c in table.columns]
    return [dict(zip(headers, row, strict=True)) for row in zip(*columns, strict=True)]


def natural_width(table: Table) -> int:
    """Columns the table takes when nothing is folded (its widest rendering)."""
    wide = Console(width=100_000, file=sys.stderr)
    return Measurement.get(wide, wide.options, table).maximum


def print_table(console: Console, table: Table) -> None:
    """Print ``table``: as is on a terminal; for a pipe its title as a plain line, then the table at
    most ``PIPE_WIDTH`` wide, or one field per line when it would be wider."""
    if is_terminal(console):
        console.print(table)
        return
    out = Console(file=console.file, width=PIPE_WIDTH, highlight=False, no_color=True, soft_wrap=False)
    title = _plain(table.title) if table.title is not None else ""
    if title:
        console.file.write(title + "\n")
    if natural_width(table) <= PIPE_WIDTH:
        table.title = None
        table.expand = False
        out.print(table)
        console.file.flush()
        return
    lines = []
    for row in table_rows(table):
        items = list(row.items())
        (first_col, first_val), rest = items[0], items[1:]
        lines.append(f"{first_col}: {first_val}")
        lines += [f"  {k}: {v}" for k, v in rest if v.strip()]
    console.file.write("\n".join(lines) + "\n")
    console.file.flush()


def print_line(console: Console, text: str) -> None:
    """A message line: rich markup on a terminal, plain unwrapped text in a pipe."""
    if is_terminal(console):
        console.print(text, highlight=False)
        return
    console.file.write(_plain(text) + "\n")
    console.file.flush()


def print_json(console: Console, data: Any) -> None:
    """``data`` as indented JSON on stdout (never wrapped or coloured; non-JSON values as strings)."""
    console.file.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")
    console.file.flush()
