"""The journal's event schema: the core event names, the payload (``data``) each one carries, and the row,
summary, verification and intent models the journal hands out. The writer and reader is
:class:`agenticdb.store.journal.Journal`.

Core events and the payload (``data``) each one carries. The set is open: any dotted lower-case name
is accepted, so new modules can add events without touching this file.

=================  ==========================================================================
event              data
=================  ==========================================================================
session.start      {"target", "workload", "dbms", "version", "fingerprint", "config", ...}
profile            RuntimeProfile JSON
baseline           {"objective": float, "measurements": [Measurement], "noise_cv": float}
proposal           Proposal JSON
verdict            Verdict JSON
intent             {"snapshot": Snapshot, "changes": [NormalizedChange], "target": str}
applied            {"effective": {name: value}, "restarted": bool, "changes": [...]}
verified           {"effective": {name: value}}
measured           Measurement JSON (optionally {"measurement": Measurement, "role": ...})
failure            Failure JSON
recovery           RecoveryResult JSON
decision           RoundOutcome JSON
intent.closed      {"how": str}
os.original        {"name", "value"}
rival.detected     {"name", "expected", "found"}
reconcile          {"intent_id", "restored", "details"}
planner.fallback   {"reason"}
llm.call           {"model", "prompt_tokens", "completion_tokens", "latency_ms", "ok"}
config.reload      {"ok", "path", "error", "not_applied": [dotted keys of [target]/[storage] kept as running]}
stop               {"decision", "reason", "elapsed_s", "time_budget_s", "budget_used", "rounds_done",
                   "max_rounds", "search_patience", "plateau_rounds", "search_rounds": [{"round", "judged",
                   "kept", "gain", "low", "high"}]}: why a stage stopped, with its figures
session.end        {"status", "baseline_objective", "best_objective", "best_config", "reason"}
=================  ==========================================================================
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from agenticdb.models import Snapshot

CORE_EVENTS: frozenset[str] = frozenset(
    {
        "session.start",
        "profile",
        "baseline",
        "proposal",
        "verdict",
        "intent",
        "applied",
        "verified",
        "measured",
        "failure",
        "recovery",
        "decision",
        "intent.closed",
        "os.original",
        "rival.detected",
        "reconcile",
        "session.end",
        "planner.fallback",
        "llm.call",
        "config.reload",
    }
)
"""Events the round loop writes (see the module docstring for their payloads)."""


class JournalError(ValueError):
    """Bad input to the journal (event name, payload, session id); the message names the value."""


class JournalEvent(BaseModel):
    """One journal row; ``data`` is the decoded JSON payload."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int
    ts: str
    session_id: str
    round_no: int | None
    event: str
    data: dict[str, Any]
    prev_hash: str
    hash: str


class VerifyResult(BaseModel):
    """Outcome of :meth:`Journal.verify`: ``first_bad_id`` names the first row that breaks the chain."""

    ok: bool
    rows_checked: int
    first_bad_id: int | None = None
    reason: str = ""
    keyed_rows: int = 0
    """Rows chained with the HMAC key (storage.journal_key_file)."""
    note: str = ""
    """How much the check proves (unkeyed rows only show accidental edits)."""


class SessionSummary(BaseModel):
    """One session as seen in the journal (``status`` is ``unfinished`` without a session.end)."""

    id: str
    started: str
    ended: str | None = None
    target: str | None = None
    workload: str | None = None
    rounds: int = 0
    baseline_objective: float | None = None
    best_objective: float | None = None
    status: str = "unfinished"


class Intent(BaseModel):
    """An ``intent`` event not yet closed: the target may be left in a trial configuration.

    ``snapshot`` is the last safe configuration to restore (None when the payload held none or an
    invalid one; ``data`` keeps the raw payload either way).
    """

    id: int
    ts: str
    session_id: str
    round_no: int | None
    target: str | None = None
    snapshot: Snapshot | None = None
    changes: list[Any] = []
    data: dict[str, Any] = {}
