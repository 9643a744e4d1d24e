"""Named steps of a round and the recorder that writes a session's record (the round's working state: ``loop.round``).

A round reads as a list of named steps — observe → plan → trial → judge → settle — each a small method
owned by its role that returns a :class:`StepResult`: the step's name and one line saying what it did
(Patroni's ``ha.py`` ``_run_cycle`` returns such a message per cycle). The :class:`SessionRecorder`
sends that line to the log and to the systemd STATUS line, and keeps the round's lines for the journal's
``decision`` event (``"steps"``); it is also the one writer of the session's journal events and intent
closures (docs/architecture.md "The round").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog
from pydantic import BaseModel

from agenticdb.models import RoundOutcome
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import Intent

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class StepResult:
    """What one step of a round did.

    Attributes:
        step: the step's name ("observe", "plan", "trial", "judge", "settle").
        line: one line for people: the log, ``systemctl status`` and the journal.
        ends_round: True when the round has nothing more to do (rejected, failed, planner plateau).
    """

    step: str
    line: str
    ends_round: bool = False


@dataclass
class SessionRecorder:
    """Writes one session's journal events, intent closures and step lines.

    Args:
        journal: the audit journal.
        session_id: the session every event belongs to.
        on_status: called with a short status line after every step (the daemon's sd_notify STATUS).
        max_rounds: shown in status lines ("round 3/10").
    """

    journal: Journal
    session_id: str
    on_status: Callable[[str], object] | None = None
    max_rounds: int = 0
    steps: list[str] = field(default_factory=list)

    def event(self, event: str, data: BaseModel | dict[str, Any], round_no: int | None = None) -> None:
        """Append ``event`` with ``data`` (a pydantic model is stored as its JSON)."""
        payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
        self.journal.append(self.session_id, event, payload, round_no)

    def close_intent(self, round_no: int | None, how: str) -> None:
        """Close the open intent of ``round_no`` (None: session-level, e.g. the final apply)."""
        self.journal.close_intent(self.session_id, round_no, how)

    def open_intents(self) -> list[Intent]:
        """This session's intents that are still open."""
        return [i for i in self.journal.open_intents() if i.session_id == self.session_id]

    def step(self, round_no: int, result: StepResult) -> StepResult:
        """Record one step: a log line, the STATUS line, and the round's step list for the journal."""
        line = f"{result.step}: {result.line}"
        self.steps.append(line)
        log.info("round.step", round=round_no, step=result.step, result=result.line, ends_round=result.ends_round)
        if self.on_status is not None:
            of = f"/{self.max_rounds}" if self.max_rounds else ""
            self.on_status(f"round {round_no}{of}: {line}"[:200])
        return result

    def take_steps(self) -> list[str]:
        """The step lines recorded since the last call (one round's), oldest first."""
        lines, self.steps = self.steps, []
        return lines


@dataclass
class SessionResult:
    """What ``tune`` prints at the end and returns to the caller."""

    session_id: str
    status: str
    reason: str
    baseline_objective: float | None = None
    best_objective: float | None = None
    objective_name: str = ""
    higher_is_better: bool = True
    best_changes: dict[str, str] = field(default_factory=dict)
    rounds: list[RoundOutcome] = field(default_factory=list)
    noise_cv: float = 0.0
    llm_totals: dict[str, float] = field(default_factory=dict)
    start_from: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    opening: str = ""
    """Why the opening's race ended without a proof ("no candidate ran to the end undisturbed: the start
    stays"), or '': the opening was proven (its round tells the verdict), skipped, or off. The screens' one-run
    effects are in ``rounds``; without this line a reader sees large screen gains and "nothing kept"."""
    baseline_disturbed: tuple[int, int] = (0, 0)
    """(baseline runs the host disturbed that the baseline still used, baseline runs): ``Measurement.disturbed``;
    the summary then quotes the gain against the start's undisturbed re-measurement (``labels.start_reference``)."""
    opening_left_out: list[str] = field(default_factory=list)
    """The opening's candidates left out of the race because the time left could not pay for them, each with its
    cost and the time left (``race.left_out_note``): the demo raced 1 of 3 candidates and never said why."""


RoundCallback = Callable[[RoundOutcome], None]
