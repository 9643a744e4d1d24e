"""agenticdb.cli.output: tables written to a file (not a terminal) are plain and at most 120 columns."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from agenticdb.cli.output import PIPE_WIDTH, print_line, print_table, table_rows


def _table(message: str) -> Table:
    t = Table(title="verdict: REJECT (nothing of this set would be applied)")
    for col in ("parameter", "value", "result", "message"):
        t.add_column(col, no_wrap=col != "message", overflow="fold")
    t.add_row("fsync", "off", "[red]rejected[/]", message)
    t.add_row("work_mem", "8MB", "[green]ok[/]", "")
    return t


def _piped() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=400, force_terminal=False), buf


def test_a_wide_table_is_listed_one_field_per_line_without_markup() -> None:
    console, buf = _piped()
    print_table(console, _table("x" * 300))
    lines = buf.getvalue().splitlines()
    assert lines[0] == "verdict: REJECT (nothing of this set would be applied)"  # not centred
    assert lines[1:5] == ["parameter: fsync", "  value: off", "  result: rejected", "  message: " + "x" * 300]
    assert lines[5:] == ["parameter: work_mem", "  value: 8MB", "  result: ok"]  # empty fields left out


def test_a_table_that_fits_stays_a_table_within_the_width() -> None:
    console, buf = _piped()
    print_table(console, _table("fsync=off can corrupt the cluster"))
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("verdict: REJECT") and any("│ fsync" in line for line in lines)
    assert max(len(line) for line in lines) <= PIPE_WIDTH
    assert all(line == line.rstrip() for line in lines)


def test_rows_and_lines_lose_their_markup() -> None:
    assert table_rows(_table("m"))[0] == {"parameter": "fsync", "value": "off", "result": "rejected", "message": "m"}
    console, buf = _piped()
    print_line(console, "[yellow]warning:[/] a [b]x[/b] y")
    assert buf.getvalue() == "warning: a x y\n"
