"""structlog set-up: one line per decision (``round.decided``, ``apply.failed`` …) with its reason.

Interactive commands keep stderr quiet (warnings only) so the live table stays readable; ``--verbose``
shows every decision line; the daemon logs INFO to stderr (journald) and ``--json-logs`` emits JSON lines.
The few INFO events in ``SHOWN_WHEN_QUIET`` pass a quiet level too: a data load's plain progress lines
appear only when no progress bar can be drawn (stdout piped), and without them a piped
``agenticdb tune`` would say nothing for the minutes a large load takes.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from structlog.typing import EventDict, Processor

from agenticdb.redaction import structlog_redactor

#: INFO events shown below a quieter level (``workload.load_progress``: agenticdb/workloads/common.py).
SHOWN_WHEN_QUIET = frozenset({"workload.load_progress"})


def _quiet_below(level: int) -> Processor:
    """A processor dropping events under ``level`` except those in ``SHOWN_WHEN_QUIET``."""

    numbers = logging.getLevelNamesMapping()

    def drop(logger: Any, method: str, event: EventDict) -> EventDict:
        number = numbers.get(str(event.get("level", "")).upper(), logging.CRITICAL)  # unknown: keep it
        if number < level and event.get("event") not in SHOWN_WHEN_QUIET:
            raise structlog.DropEvent
        return event

    return drop


def _stderr_logger(*args: Any) -> structlog.PrintLogger:
    """A logger on the ``sys.stderr`` of the moment it is made (each call: ``cache_logger_on_first_use`` is off),
    not the one in place when logging was configured: a command run inside ``typer.testing.CliRunner`` configured
    logging on the runner's stream, which it closes, and every later log line in the process then raised
    "I/O operation on closed file"."""
    return structlog.PrintLogger(file=sys.stderr)


def configure_logging(verbose: bool = False, json_logs: bool = False, level: int | None = None) -> None:
    """Configure structlog for the process (idempotent)."""
    if level is None:
        level = logging.DEBUG if verbose else logging.WARNING
    renderer = structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _quiet_below(level),
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog_redactor,  # DSN passwords and API keys never reach a log line
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(min(level, logging.INFO)),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=False,
    )
