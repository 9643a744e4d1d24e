"""Whether the daemon's pseudo-session (journal session ``daemon``) stopped cleanly, when and why.

One rule for every reader of the journal (``journal show`` and ``report``; ``Journal.sessions`` applies the same
rule in SQL for ``journal list``): the daemon stopped when a ``daemon.stop`` event follows its last
``daemon.start`` (agenticdb/daemon.py writes ``{"reason": …}`` when it refuses to go on, then
``{"signals": [...]}`` in its shutdown's ``finally``). Without one it is still running, or the process died.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agenticdb.store.journal_events import JournalEvent


@dataclass(frozen=True)
class DaemonStop:
    """A clean stop of the daemon: ``ts`` the last ``daemon.stop`` event's journal timestamp (ISO 8601 text, as
    the journal stores it), ``why`` its reason (:func:`stop_text`: ``"by SIGTERM"``, the reason it refused to go
    on, or that no signal asked for it)."""

    ts: str
    why: str

    @property
    def reason(self) -> str:
        """The stop as a session's end reason: ``"the daemon stopped 2026-12-07T06:30:05+00:00: by SIGTERM"``."""
        return f"the daemon stopped {self.ts}: {self.why}"


def daemon_stop(events: list[JournalEvent]) -> DaemonStop | None:
    """The daemon's clean stop told by ``events`` (one journal session's, oldest first): the ``daemon.stop``
    events after its last ``daemon.start`` (all of them when no start is journaled), or None when there is none
    (still running, or the process died) or the session ended (``session.end``: a tuning session)."""
    if any(e.event == "session.end" for e in events):
        return None
    starts = [i for i, e in enumerate(events) if e.event == "daemon.start"]
    stops = [e for e in events[starts[-1] + 1 if starts else 0 :] if e.event == "daemon.stop"]
    if not stops:
        return None
    return DaemonStop(str(stops[-1].ts), stop_text([e.data for e in stops]))


def stop_text(stops: list[dict[str, Any]]) -> str:
    """Why the daemon stopped, from the ``daemon.stop`` payloads of one run (agenticdb/daemon.py writes
    ``{"reason": …}`` when it refused to go on, then ``{"signals": [...]}`` in its ``finally``):
    ``"by SIGTERM"``, the reason, or that no signal asked for it."""
    reasons = [str(d["reason"]) for d in stops if d.get("reason")]
    signals = [str(s) for d in stops for s in d.get("signals") or []]
    by = ", ".join(f"{s} ×{signals.count(s)}" if signals.count(s) > 1 else s for s in dict.fromkeys(signals))
    if reasons:
        return "; ".join(reasons) + (f" (signals: {by})" if by else "")
    if by:
        return f"by {by}"
    return "without a stop signal: the service ended on its own (the events above say why)"
