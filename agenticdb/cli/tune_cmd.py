"""Bodies of the tune / validate / catalog / report commands (kept apart from argument parsing in
``agenticdb.cli``; rollback is in :mod:`agenticdb.cli.rollback_cmd`). Each returns the process exit code."""

from __future__ import annotations

import math
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from agenticdb.config import Settings
from agenticdb.errors import Stopped
from agenticdb.invocation import STORE_FLAGS, command
from agenticdb.models import RoundOutcome
from agenticdb.redaction import redact
from agenticdb.report.effects import effect_summary, round_effect
from agenticdb.report.judged import disturbed_told
from agenticdb.report.labels import baseline_run_text, gain_over, noise_said, start_reference
from agenticdb.store.faults import cause_of
from agenticdb.store.journal import Journal
from agenticdb.store.lock import LockError, TargetLock
from agenticdb.store.memory import MemoryBook
from agenticdb.targets.base import Target
from agenticdb.workloads.base import Workload, WorkloadError

if TYPE_CHECKING:
    from agenticdb.store.lock import TargetLock

log = structlog.get_logger(__name__)


def _fmt_obj(v: float | None) -> str:
    return "—" if v is None else f"{v:,.3f}"


def estimate_text(r: RoundOutcome, kept: bool = True) -> str:
    """A round's decision in numbers (``agenticdb.report.effects.round_effect``: the paired estimate with its
    interval, the medians of too few pairs, or the screen's gain — none for a screen cut off or disturbed);
    `` kept`` after it when the round was kept and ``kept`` (False where :func:`verdict_text` says so)."""
    return round_effect(r) + (" kept" if r.kept and kept else "")


_CAUSES = (
    ("cut off after the screen", "cut off after its screen"),
    ("counted as worse (the host was not disturbed)", "cut off by the trial limit"),
    ("beyond the latency guard", "p95 latency guard"),
    ("host too disturbed:", "host too disturbed"),
    ("budget ended inside the decision", "session budget ended inside the decision"),
    ("cannot beat min_gain", "cannot beat min_gain"),
    ("pairs disagree in direction", "pairs disagree"),
    ("time cap was reached before a valid pair", "decision's time cap, no valid pair"),
    ("decision's time cap", "decision's time cap"),
    ("not settled", "not settled"),
)
"""(text in the auditor's reason, the short cause shown beside the verdict), first match wins: the reasons
of ``agenticdb.loop.auditor`` (cut-off, too disturbed, caps) and ``agenticdb.measure.sequential`` (rules)."""


def verdict_text(judged: str | None, reason: str, kept: bool) -> str:
    """The auditor's verdict and what became of the round, e.g. ``tie (host too disturbed), reverted`` or
    ``better, kept`` ("" when nothing was judged: refused or failed rounds). ``reason`` is the ``judged``
    event's reason; a short cause from it is shown for ties, undecided rounds and cut-off or guarded losses,
    the verdicts whose why is not the estimate itself."""
    if not judged:
        return ""
    cause = next((short for text, short in _CAUSES if text in reason), "")
    if judged == "better" or (judged == "worse" and cause not in {c for _, c in _CAUSES[:3]}):
        cause = ""
    return f"{judged}{f' ({cause})' if cause else ''}, {'kept' if kept else 'reverted'}"


def medians_text(r: RoundOutcome, labelled: bool = False) -> str:
    """Candidate vs best medians of the runs the decision used; ``labelled`` names them ("candidate X vs
    best Y") where no column header does (round lines). The estimate shown after them is the mean of the
    per-pair ratios, which can differ from the ratio of the medians. The pairs the decision discarded because the
    host disturbed them follow, in the story's words (``report.judged.disturbed_told``): the medians are not of
    every run measured."""
    disturbed = f"; {told}" if (told := disturbed_told(len(r.disturbed_pairs))) else ""
    if r.objective is None:
        return "—" + disturbed
    if r.best_objective is None:  # cut off after its screen: one run, not a median of pairs
        return f"{_fmt_obj(r.objective)} (one screen run){disturbed}"
    if labelled:  # the estimate that follows is not their ratio: show the pairs it is made of (issue 39)
        medians = f"candidate {_fmt_obj(r.objective)} vs best {_fmt_obj(r.best_objective)} (medians)"
        return f"{medians}{disturbed}{pairs_text(r)}"
    return f"{_fmt_obj(r.objective)} vs {_fmt_obj(r.best_objective)}{disturbed}"


def pairs_text(r: RoundOutcome) -> str:
    """``; gain per pair (candidate vs best, + = candidate better) +3.1 %, -8.0 %, -3.5 %; paired estimate (their
    geometric mean)``: the per-pair gains the estimate is made of (``GainEstimate.pair_gains``, oriented: for a
    lower-is-better objective +13.1 % means the candidate's run was faster; a new user read them under the label
    "candidate/best" as ratios), so a median ratio of the other sign is not read as a contradiction; without them
    (records before issue 39) ``, paired estimate`` and why it may differ."""
    gains = r.estimate.pair_gains if r.estimate is not None else []
    if not gains:
        return ", paired estimate (mean of the pair ratios, not the medians' ratio)"
    shown = ", ".join(f"{g:+.1%}".replace("%", " %") for g in gains)
    return f"; gain per pair (candidate vs best, + = candidate better) {shown}; paired estimate (their geometric mean)"


def rounds_table(rounds: list[RoundOutcome], higher: bool = True) -> Table:
    """The live table of rounds: round, stage (layer · "playbook"/"search"), bottleneck, changes, candidate
    vs best (medians of the paired runs the decision used), the estimate with its interval, the verdict and
    whether the round was kept, the next move (decision) and its reason."""
    t = Table(title="agenticdb rounds", expand=False, show_lines=False)
    cols = ("round", "stage", "bottleneck", "changes", "candidate vs best", "estimate", "verdict", "decision", "reason")
    for col in cols:
        t.add_column(col, overflow="fold")
    for r in rounds:
        changes = ", ".join(f"{k}={v}" for k, v in r.changes.items()) or "—"
        if not r.verdict_ok and r.failed_checks:
            changes += f"  [red](rejected: {r.failed_checks[0].check})[/]"
        if r.failure:
            changes += f"  [red](failed: {r.failure.phase}; {r.recovery.action if r.recovery else 'no recovery'})[/]"
        t.add_row(
            str(r.round_no),
            stage_text(r),
            r.bottleneck.value,
            changes,
            medians_text(r),
            estimate_text(r, kept=False),
            verdict_text(r.judged, r.judged_reason, r.kept) or "—",
            r.decision.value,
            r.reason,
        )
    return t


def run_tune(cfg: Settings, console: Console, start_from: dict[str, Any] | None) -> int:
    """Build the components, run one session with a live table, print the summary."""
    from agenticdb.app import build_session  # lazy: start-up cost (loads 9 modules)
    from agenticdb.loop.session import SessionError  # lazy: start-up cost (loads scipy; 612 modules)

    parts = _tune_parts(cfg, console)
    if isinstance(parts, int):
        return parts
    journal, memory, target, workload = parts
    rounds: list[RoundOutcome] = []
    live = (
        Live(rounds_table(rounds), console=console, refresh_per_second=2, transient=False)
        if console.is_terminal
        else None
    )
    lock = _target_lock(cfg, console)
    if lock is None:
        return 1
    stop = {"requested": 0}
    built: list[Any] = []  # the session once built: where it is (TuningSession.starting, .racing), for stop_message
    previous_handler = signal.signal(signal.SIGINT, _on_sigint(console, stop, lambda: stop_message(built)))
    previous_term = signal.signal(signal.SIGTERM, _on_sigterm(console, stop))
    try:
        session = build_session(
            cfg,
            target,
            workload,
            journal,
            memory,
            on_round=_round_printer(console, rounds, live),
            start_from=start_from,
            should_stop=lambda: stop["requested"] > 0,
            remediate=_remediate(cfg, journal, lambda: stop["requested"] > 0, console),
            on_baseline_run=lambda *run: console.print(
                baseline_run_text(*run), highlight=False, markup=False, soft_wrap=True
            ),  # one line per baseline run: a piped tune printed nothing for a busy host's 8-minute baseline
        )
        built.append(session)
        console.print(
            f"agenticdb session [bold]{session.session_id}[/]: {cfg.target.kind} at "
            f"{_safe_dsn(cfg.target.dsn or '')}, workload {cfg.workload.kind}, planner {session.planner.name}, "
            f"up to {cfg.loop.max_rounds} rounds, durability {cfg.policy.durability}",
            highlight=False,
        )
        try:
            if live is not None:
                with live:
                    result = session.run()
            else:
                result = session.run()
        except SessionError as exc:
            console.print(f"[red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
            return exc.exit_code
    finally:
        signal.signal(signal.SIGINT, previous_handler)
        signal.signal(signal.SIGTERM, previous_term)
        lock.release()
        target.close()
        journal.close()  # the files may sit on a mount that must be released (a storage fault)
        memory.close()
    _summary(console, cfg, result)
    if result.status == "completed":
        return 0
    return 130 if result.status in ("interrupted", "stopped") else 1


def _target_lock(cfg: Settings, console: Console) -> TargetLock | None:
    """The target's lock, held; None (said why) when another process holds it or its file cannot be written."""
    try:
        lock = TargetLock(cfg.storage.home, cfg.target.dsn or "")
        lock.acquire()
    except LockError as exc:
        console.print(f"[red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
        return None
    except OSError as exc:  # the lock file cannot be created or written: disk full, read-only, permissions
        console.print(f"[red]error:[/] cannot write the lock file {lock.path}: {cause_of(exc)}", highlight=False)
        return None
    return lock


def _tune_parts(cfg: Settings, console: Console) -> tuple[Journal, MemoryBook, Target, Workload] | int:
    """Journal, Memory Book, target and workload of a tune, or the exit code when one cannot be built."""
    from agenticdb.app import (  # lazy: start-up cost (loads 9 modules)
        SetupError,
        build_target,
        build_workload,
        check_planner,
        check_privileges,
        open_stores,
    )

    try:
        check_planner(cfg)  # before anything connects to the database
    except SetupError as exc:
        console.print(f"[red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
        return 2
    journal, memory = open_stores(cfg)
    try:
        target = build_target(cfg)
        if not target.available():
            why = target.unavailable_reason or "not accepting connections"
            console.print(
                f"[red]error:[/] target {cfg.target.kind} at {escape(_safe_dsn(cfg.target.dsn or ''))}: {escape(why)}",
                highlight=False,
                soft_wrap=True,
            )
            return 1
        check_privileges(cfg)
        workload = build_workload(cfg, target)
    except (SetupError, ValueError, WorkloadError) as exc:  # a workload that cannot fit this target
        console.print(f"[red]error:[/] {escape(redact(str(exc)))}", highlight=False, soft_wrap=True)
        return 2
    return journal, memory, target, workload


def stage_text(r: RoundOutcome) -> str:
    """The round's stage: ``dbms`` (no proposal), ``dbms · playbook`` / ``dbms · search``, and for the opening
    the candidate it screens or proves, ``dbms · opening screen of 'evidence'`` (``RoundOutcome.opening_label``)."""
    if r.proposal is None:
        return r.stage.value
    return f"{r.stage.value} · {r.opening_label or r.proposal.stage}"


def _round_printer(console: Console, rounds: list[RoundOutcome], live: Live | None) -> Callable[[RoundOutcome], None]:
    """The per-round callback: the live table on a terminal, one line per round otherwise."""

    def on_round(outcome: RoundOutcome) -> None:
        rounds.append(outcome)
        if live is not None:
            live.update(rounds_table(rounds))
            return
        stage = stage_text(outcome) if outcome.opening else outcome.stage.value  # the opening's: which candidate
        verdict = verdict_text(outcome.judged, outcome.judged_reason, outcome.kept)
        verdict += "; " if verdict else ""
        console.print(
            f"round {outcome.round_no} [{stage}] {outcome.bottleneck.value}: "
            f"{', '.join(f'{k}={v}' for k, v in outcome.changes.items()) or '—'} → "
            f"{medians_text(outcome, labelled=True)}: {estimate_text(outcome, kept=not verdict)}; {verdict}"
            f"{outcome.decision.value}: {outcome.reason}" + _refusal_text(outcome) + _failure_text(outcome),
            highlight=False,
            soft_wrap=True,
            markup=False,  # "[dbms]" and values in brackets are text, not rich markup
        )

    return on_round


def _refusal_text(outcome: RoundOutcome) -> str:
    """``; refused by the validator: <first failed check's message> (+N more)`` for a round whose last
    proposal the validator refused (nothing was applied or measured), else ""."""
    if outcome.verdict_ok or not outcome.failed_checks:
        return ""
    first, more = outcome.failed_checks[0], len(outcome.failed_checks) - 1
    return f"; refused by the validator: {first.message}" + (f" (+{more} more)" if more else "")


def _failure_text(outcome: RoundOutcome) -> str:
    """``; failed in restart: <message with the server's reason>; recovery restored`` or ""."""
    f = outcome.failure
    if f is None:
        return ""
    recovery = outcome.recovery.action if outcome.recovery else "none"
    return f"; failed in {f.phase}: {f.message}; recovery {recovery}"


RACE_STOP = (
    "[yellow]stopping the opening's race now[/]: a screen in flight ends at once, no further screen or proof "
    "starts, and the starting configuration is put back and verified (Ctrl-C again to stop at once; the start "
    "is put back either way)"
)
"""The first Ctrl-C's message while the opening races (``TuningSession.racing``; ``loop.opening_run``)."""

ROUND_STOP = (
    "[yellow]stopping after this round[/] (Ctrl-C again to stop now; the best configuration is put back either way)"
)
"""The first Ctrl-C's message in the round loop: the round in flight (the opening's proof too) finishes."""

START_STOP = (
    "[yellow]stopping before the first round[/]: the start finishes first (a data load in progress and the "
    "baseline's remaining runs: no run is cut short), then the session ends without trying a change (Ctrl-C again "
    "to stop now)"
)
"""The first Ctrl-C's message before the round loop (``TuningSession.starting``): the start does not look at the
stop request (``Initializer.run``: the data load, ``--start-from``, every baseline run ``measure_baseline`` still
takes, extra and repeated runs included); the session then stops before the opening and round 1
(``TuningSession._loop``). The baseline is no round: "after this round" said otherwise."""


def stop_message(built: list[Any]) -> str:
    """What the first Ctrl-C does now, by where the session is (``built``: the session once built, else empty):
    :data:`START_STOP` while it is not built or still starting, :data:`RACE_STOP` while the opening races,
    :data:`ROUND_STOP` otherwise."""
    if not built or built[0].starting:
        return START_STOP
    return RACE_STOP if built[0].racing else ROUND_STOP


def _on_sigint(console: Console, stop: dict[str, int], message: Callable[[], str]) -> Callable[[int, Any], None]:
    """The SIGINT handler: the first Ctrl-C requests the stop and says what it does now (``message()``:
    :func:`stop_message`); the second raises ``KeyboardInterrupt`` (the session still restores the best
    configuration in its finally block)."""

    def on_sigint(signum: int, frame: Any) -> None:
        stop["requested"] += 1
        if stop["requested"] >= 2:
            raise KeyboardInterrupt
        console.print(message())

    return on_sigint


def _on_sigterm(console: Console, stop: dict[str, int]) -> Callable[[int, Any], None]:
    """SIGTERM (kill, ``timeout``, a service manager) stops at once like a second Ctrl-C: the session's
    finally block puts the best configuration back, verifies it and journals the session end
    (docs/safety.md: an interrupted session never leaves a candidate in place)."""

    def on_sigterm(signum: int, frame: Any) -> None:
        stop["requested"] = max(stop["requested"], 2)
        console.print("[yellow]SIGTERM: stopping now[/]; the best configuration is put back")
        raise Stopped("SIGTERM")

    return on_sigterm


def _safe_dsn(dsn: str) -> str:
    """DSN without a password (for printing and the journal; agenticdb.redaction.redact)."""
    return redact(dsn)


def llm_usage_line(t: dict[str, Any]) -> str:
    """One summary line from ``LLMPlanner.totals`` (tokens as the endpoint reported them in ``usage``,
    cost in USD from the planner.price_* table, latency summed over calls in ms)."""
    return (
        f"LLM usage: {int(t.get('calls', 0))} calls ({int(t.get('failed_calls', 0))} failed), "
        f"{int(t.get('prompt_tokens', 0)):,} prompt tokens ({int(t.get('cached_tokens', 0)):,} cached), "
        f"{int(t.get('completion_tokens', 0)):,} completion tokens, cost ${float(t.get('cost_usd', 0)):.6f}, "
        f"latency {float(t.get('latency_ms', 0)):,.0f} ms, "
        f"{int(t.get('fallbacks', 0))} rounds planned by the fallback planner"
    )


OBJECTIVE_NAMES = {
    "tps_per_p95": "TPS/p95 (transactions per second per ms of p95 latency)",
    "tps": "TPS (transactions per second)",
    "p95": "p95 latency (ms)",
    "total_time": "total execution time (s)",
}


def _summary(console: Console, cfg: Settings, result: Any) -> None:
    direction = "higher is better" if result.higher_is_better else "lower is better"
    gain = None
    if result.baseline_objective and result.best_objective:
        from agenticdb.loop.next_move import relative_gain  # lazy: start-up cost (loads scipy; 586 modules)

        gain = relative_gain(result.best_objective, result.baseline_objective, result.higher_is_better)
    console.print()
    console.print(
        f"[bold]session {result.session_id}[/]: {result.status} — {result.reason}",
        highlight=False,
        soft_wrap=True,
    )  # one line however long the reason (it may be the planner's error)
    noise = (  # one baseline run (a short budget) has no spread: the CV on record is the prior, not a measurement
        f"noise CV {noise_said(result.noise_cv, 1)}"
        if result.baseline_disturbed[1] == 1
        else f"measured noise CV {result.noise_cv:.1%} per run"
    )
    console.print(
        f"objective {OBJECTIVE_NAMES.get(result.objective_name, result.objective_name)} ({direction}); {noise}",
        highlight=False,
    )
    console.print(
        baseline_best_text(
            result.baseline_objective,
            result.best_objective,
            result.rounds,
            gain,
            noise_cv=result.noise_cv,
            disturbed=result.baseline_disturbed,
            higher=result.higher_is_better,
        ),
        highlight=False,
        soft_wrap=True,
    )
    for w in result.warnings:
        console.print(f"[yellow]warning:[/] {w}", highlight=False, soft_wrap=True)
    if result.start_from:
        console.print(
            "starting configuration from --start-from (applied before the baseline, still in effect "
            f"unless changed below; `{command('rollback --dbms')}` undoes it):",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
        for k, v in result.start_from.items():
            console.print(f"  {k} = {v}", highlight=False)
    for note in result.opening_left_out:
        console.print(f"opening: {note}", highlight=False, soft_wrap=True, markup=False)
    if result.opening and result.opening not in result.reason:  # a stopped race: its reason is the session's
        console.print(f"opening not proven: {result.opening}", highlight=False, soft_wrap=True, markup=False)
    if result.rounds:
        _verdicts(console, result.rounds, result.baseline_objective, result.noise_cv, result.baseline_disturbed)
    else:  # the reason says what ended it (the time budget, a root cause, a stop); the line says so plainly
        console.print(f"no round ran: {result.reason}", highlight=False, soft_wrap=True, markup=False)
    if result.best_changes:
        console.print("best configuration (in effect and verified):")
        for k, v in result.best_changes.items():
            console.print(f"  {k} = {v}", highlight=False)
    else:
        console.print("best configuration: the starting configuration, unchanged (no change beat it beyond noise)")
    if result.llm_totals:
        console.print(llm_usage_line(result.llm_totals), highlight=False, soft_wrap=True)
    console.print(
        f"journal: {cfg.storage.journal_db}   ({command(f'journal show {result.session_id}', STORE_FLAGS)})",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )
    console.print(f"memory:  {cfg.storage.memory_db}")


def budget_warning(cfg: Settings) -> list[str]:
    """One warning when, by the loop's own cost priors (``race_cost.session_floor_s``: the baseline's runs and
    the smallest decision), ``loop.time_budget_s`` cannot pay for the baseline and one decision: the session
    would end after its baseline with no round. [] otherwise, and for a query set (TPC-H), whose run length
    is not known before its first run. A run lasts ``warmup_max_s + duration_s`` (``WorkloadConfig``); nothing
    measured, no prewarm time is known yet (``CostBasis.prewarm_s`` 0)."""
    from agenticdb.loop.next_move import decision_runs  # lazy: start-up cost (loads scipy)
    from agenticdb.loop.race_cost import CostBasis, session_floor_s  # lazy: start-up cost (loads the loop)
    from agenticdb.workload_kinds import kind_spec  # lazy: only tune asks

    w, loop = cfg.workload, cfg.loop
    if "total_time" in (kind_spec(w.kind).objectives or ()):
        return []
    run_s = w.duration_s + w.warmup_max_s
    basis = CostBasis([run_s], w.warmup_s, loop.min_pairs, query_set=False, reset_each_run=loop.reset_data)
    baseline, decision = session_floor_s(basis, loop.baseline_runs)
    need = math.ceil(baseline + decision)
    if need <= loop.time_budget_s:
        return []
    runs = decision_runs(loop.min_pairs, True)
    return [
        f"time budget {loop.time_budget_s:g}s cannot pay for the baseline and one decision: by the cost priors "
        f"{min(loop.baseline_runs, 2)} baseline runs of {run_s:g}s take {baseline:.0f}s and the smallest decision "
        f"({loop.min_pairs} pairs, {runs} runs, the baseline's last run standing as pair 1's best run) "
        f"{decision:.0f}s, {need}s in all, so the session would end after "
        f"its baseline with no round; give --time-budget {need} or more (a first data load, each run's start-up "
        "and repeats of runs the host disturbed come on top; a disturbed last baseline run adds one run to the "
        "decision)"
    ]


def baseline_best_text(
    base: float | None,
    best: float | None,
    rounds: list[RoundOutcome],
    gain: float | None,
    unit: str = "",
    noise_cv: float = 0.0,
    disturbed: tuple[int, int] = (0, 0),
    higher: bool = True,
) -> str:
    """``baseline X → best Y (+g %)`` from the best configuration's own runs, saying when it was measured
    again later (the best configuration's runs in a later round's pairs) — a re-measured baseline is the
    host's load changing, not a gain (issue 39: "baseline 938.720 → best 938.720" while the same
    configuration measured 1,392–1,538 later on a quieter host).

    When the baseline is stale or disturbed (``agenticdb.report.labels.start_reference``: ``noise_cv`` the
    baseline's run CV, ``disturbed`` its (disturbed runs kept, runs)), the gain of a kept configuration is
    quoted against the start as the first kept round's undisturbed pairs measured it, and the clause says so
    ("+4.2% against the start as re-measured 1,440.000 in round 2's undisturbed pairs; the baseline is stale
    (…)"), ``higher`` the objective's direction; ``gain`` (against the baseline) is then not shown."""
    kept_no, again, start_again = _measured_again(rounds)
    u = f" {unit}" if unit else ""
    why = ""
    if base is not None:
        reference, why = start_reference(base, start_again, noise_cv, disturbed, _fmt_obj)
        if why and best is not None and kept_no is not None:
            gain = gain_over(best, reference, higher)
    figures = f"baseline {_fmt_obj(base)} → best {_fmt_obj(best)}{u}"
    if not rounds:  # no round records (a session without rounds, or the Memory Book missing): the figures
        return figures + (f" ({gain:+.1%})" if gain is not None else "") + (f" ({why})" if why else "")
    if kept_no is None:
        text = f"{figures} (nothing kept: the starting configuration"
        if again is not None:
            text += f"; re-measured {_fmt_obj(again[1])} in round {again[0]}'s pairs: the host changed, not it"
        if disturbed[0]:
            text += f"; the baseline is disturbed ({disturbed[0]} of {disturbed[1]} runs)"
        return text + ")"
    text = figures
    if gain is not None:
        text += f" ({gain:+.1%} against {why})" if why else f" ({gain:+.1%})"
    text += f" (best: round {kept_no}'s kept configuration, its own runs"
    if again is not None:
        text += f"; re-measured {_fmt_obj(again[1])} in round {again[0]}'s pairs"
    return text + ")"


def _measured_again(
    rounds: list[RoundOutcome],
) -> tuple[int | None, tuple[int, float] | None, tuple[int, float] | None]:
    """(the last kept round or None, (round, median) of the best configuration's runs in the latest later
    pairs or None, (round, median) of the start's runs in the first kept round's pairs — or, nothing kept, in
    the latest pairs — or None)."""
    kept_no, again, start_again = None, None, None
    for r in rounds:
        if r.kept:
            if kept_no is None and r.best_objective is not None:  # the first kept round's pairs: the start's runs
                start_again = (r.round_no, r.best_objective)
            kept_no, again = r.round_no, None
        elif r.best_objective is not None:
            again = (r.round_no, r.best_objective)
    return kept_no, again, again if kept_no is None else start_again


def _verdicts(
    console: Console,
    rounds: list[RoundOutcome],
    base: float | None = None,
    noise_cv: float = 0.0,
    disturbed: tuple[int, int] = (0, 0),
) -> None:
    """What the decisions showed: each kept change with its interval, or else the largest effect a decision
    measured (``agenticdb.report.effects.effect_summary``: a screen cut off, disturbed or against a stale
    baseline is not quoted as one; ``base``, ``noise_cv``, ``disturbed`` the baseline's, as in
    :func:`baseline_best_text`)."""
    kept = [r for r in rounds if r.kept]
    for r in kept:
        changes = ", ".join(f"{k}={v}" for k, v in r.changes.items())
        which = f" ({r.opening_label})" if r.opening_label else ""
        console.print(
            f"kept in round {r.round_no}{which}: {changes}: {estimate_text(r)}", highlight=False, soft_wrap=True
        )
    if kept:
        return
    verdicts = {r.round_no: verdict_text(r.judged, r.judged_reason, r.kept) for r in rounds}
    line = effect_summary(rounds, verdicts, base, _measured_again(rounds)[2], noise_cv, disturbed)
    if not line:
        console.print("no change was measured against the starting configuration", highlight=False)
        return
    console.print(f"nothing beat the starting configuration: {line}", highlight=False, soft_wrap=True)


# -------------------------------------------------------------------------------------- report


def _remediate(
    cfg: Settings, journal: Journal, should_stop: Callable[[], bool], console: Console
) -> Callable[[str, Any], dict[str, Any] | None] | None:
    """policy.mode = approve: a dominant root cause's remedy waits for ``agenticdb approve`` (issue 40)."""
    if cfg.policy.mode != "approve":
        return None
    from agenticdb.advice.approval import Desk  # lazy: approval mode only
    from agenticdb.advice.remedy_gate import remedy_gate  # lazy: approval mode only
    from agenticdb.app import advice_parts  # lazy: approval mode only

    def status(line: str) -> None:
        console.print(line, highlight=False)

    return remedy_gate(cfg, Desk(cfg, advice_parts()), journal, should_stop, status)
