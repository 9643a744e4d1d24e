"""The working state of one round while its steps run, and how a failed step ends it (beside the session)."""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from agenticdb.loop.auditor import Assessment
from agenticdb.loop.executor import PairedRuns
from agenticdb.loop.planning import Plan
from agenticdb.loop.runwatch import STOPPING
from agenticdb.loop.stage import StageState, recover_round
from agenticdb.loop.steps import SessionRecorder, StepResult
from agenticdb.models import FailedCheck, Failure, Layer, Measurement, RoundOutcome, Snapshot, StateDelta, Verdict

log = structlog.get_logger(__name__)

log = structlog.get_logger(__name__)


@dataclass
class Round:
    """The working state of one round while its steps run."""

    no: int
    layer: Layer
    stage: StageState
    delta: StateDelta | None
    current: dict[str, str] = field(default_factory=dict)
    plan: Plan | None = None
    outcome: RoundOutcome | None = None
    safe: Snapshot | None = None
    screen: Measurement | None = None
    prior_best: Measurement | None = None  # the best configuration's run right before the trial, if any
    runs: PairedRuns | None = None
    assessment: Assessment | None = None
    plateau: bool = False
    not_started: str = ""  # why the trial was not started for want of time (TuningSession._not_started), or ''


def round_failed(r: Round, step: str, failure: Failure, recorder: SessionRecorder) -> StepResult:
    """A failed trial, confirmation or revert of round ``r`` (in ``step``): recovery back to the round's safe
    snapshot (:func:`recover_round`), both kept on the round's outcome; the returned step ends the round and
    tells the failure with the server's own reason (``Failure.message``) and how recovery ended."""
    assert r.outcome is not None and r.safe is not None
    r.outcome.recovery = recover_round(r.stage.target, failure, r.safe, recorder, r.no)
    if failure.outside:
        # someone else restarted the server (issue 38), or the session's stop ended the run
        # (runwatch.StopInterrupted): recovery as for a failure, but the round is not the candidate's
        # failure, in this session's memory or in experience (next_move.decide may repeat it)
        r.outcome.interrupted = failure.outside
        cause = "session stop" if STOPPING in failure.outside else "outside restart"
        recorder.event("round.interrupted", {"evidence": failure.outside, "message": failure.message}, r.no)
        log.warning("round.interrupted", round=r.no, evidence=failure.outside, reason=cause)
        return StepResult(
            step,
            f"interrupted by {'the' if cause == 'session stop' else 'an'} {cause} ({failure.outside}); "
            f"recovery {r.outcome.recovery.action}; not the candidate's failure",
            True,
        )
    r.outcome.failure = failure
    return StepResult(step, f"failed in {failure.phase}: {failure.message}; recovery {r.outcome.recovery.action}", True)


def refused_trial(
    outcome: RoundOutcome, verdict: Verdict, why: str, recorder: SessionRecorder, round_no: int
) -> StepResult:
    """A trial a person rejected (or let expire; ``why`` says which, from the approval gate
    ``advice.approval.Desk.gate``): nothing is applied; each change of ``verdict`` is added to ``outcome``
    as a failed ``approval`` check, which the planner reads as a ban of the knob for the rest of the
    session (``planner.base.bans_knob``). Journaled as ``approval.refused``; the returned step ends the
    round."""
    checks = [FailedCheck(check="approval", parameter=c.name, value=c.value, message=why) for c in verdict.changes]
    outcome.verdict_ok = False
    outcome.failed_checks = [*outcome.failed_checks, *checks]
    recorder.event("approval.refused", {"reason": why, "changes": {c.parameter: c.value for c in checks}}, round_no)
    log.info("round.not_approved", round=round_no, reason=why)
    return StepResult("trial", f"not applied: {why}", ends_round=True)
