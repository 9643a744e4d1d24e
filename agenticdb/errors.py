"""Errors that end a tuning session, with the exit code the command line returns for each.

Raised by the initializer (before the first round) and the session; ``agenticdb tune`` prints the
message on one line and exits with ``exit_code`` (README "Commands": 0 success, 1 the operation failed,
2 bad usage or configuration, 130 interrupted).
"""

from __future__ import annotations


class SessionError(RuntimeError):
    """The session could not continue (initialization failed, or recovery could not restore service)."""

    exit_code = 1


class SessionUsageError(SessionError):
    """The session was asked for something it refuses (e.g. ``reset_data`` on a real server); nothing ran."""

    exit_code = 2


class Stopped(KeyboardInterrupt):
    """A stop signal (SIGTERM: ``kill``, ``timeout``, a service manager) ends the session at once, like a
    second Ctrl-C, but is told as what it was: "stopped (SIGTERM)", not "interrupted (Ctrl-C)"."""

    def __init__(self, signal_name: str = "SIGTERM") -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def stop_cause(exc: BaseException) -> tuple[str, str]:
    """(status, words) of a ``KeyboardInterrupt``: ("stopped", "stopped (SIGTERM)") for :class:`Stopped`,
    else ("interrupted", "interrupted (Ctrl-C)")."""
    if isinstance(exc, Stopped):
        return "stopped", f"stopped ({exc.signal_name})"
    return "interrupted", "interrupted (Ctrl-C)"


class SessionInterrupted(SessionError):
    """Ctrl-C before the first round."""

    exit_code = 130


class GaugeUnknown(RuntimeError):
    """A gauge read on demand for a validator rule (``Target.rule_gauges``, ``Observed.read``) whose value the
    target cannot know as this account: a read would undercount (e.g. information_schema.TABLES lists only the
    tables the account holds a privilege on). ``reasons`` says why, by gauge name; the rule then treats the
    gauge as unknown and says why in its refusal."""

    def __init__(self, reasons: dict[str, str]) -> None:
        super().__init__("; ".join(f"{n}: {r}" for n, r in reasons.items()))
        self.reasons = dict(reasons)
