"""structlog set-up: one line per decision (``round.decided``, ``apply.failed`` …) with its reason.

Interactive commands keep stderr quiet (warnings only) so the live table stays readable; ``--verbose``
shows every decision line; the daemon logs INFO to stderr (journald) and ``--json-logs`` emits JSON lines.
"""

from __future__ import annotations

import logging
import sys

import structlog

from agenticdb.redaction import structlog_redactor


def configure_logging(verbose: bool = False, json_logs: bool = False, level: int | None = None) -> None:
    """Configure structlog for the process (idempotent)."""
    if level is None:
        level = logging.DEBUG if verbose else logging.WARNING
    renderer = structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog_redactor,  # DSN passwords and API keys never reach a log line
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
