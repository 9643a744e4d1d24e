"""The refinement stage: model-based search after the playbook (issue 14; docs/architecture.md "Roles").

:class:`RefiningPlanner` wraps the playbook planner (heuristic or LLM). While the playbook has a
prescription it is used as is (``Proposal.stage = "playbook"``). When it is used up — the planner says
plateau, or ``switch_after`` playbook rounds of the stage in a row were not kept — the stage switches
to search (``Proposal.stage = "search"``). Proposals say who made them: the playbook planner's name,
``planner = "search"`` for the TPE suggestions and ``"trade"`` for trade moves, so a journal never
credits the LLM with a suggestion it did not make.

* **Subspace.** The knobs the playbook names for the top diagnosed bottlenecks (``diagnose`` scores),
  numeric, tunable in this stage, at most ``max_knobs``. Each knob's range is log-scaled around its
  value when the search starts: ``[start / f, start × f]`` with ``f = policy.max_step_factor`` (the
  validator's step bound), clipped to the catalog's min/max (the server's own, pg_settings /
  SYSTEM_VARIABLES) and, for sizes, to half the memory limit (cgroup limit, else RAM).
* **Optimizer.** Optuna's TPE sampler (``optuna.samplers.TPESampler``, multivariate; Bergstra et al.
  2011), driven by ask/tell: one suggestion per proposal.
* **Warm start.** Every configuration measured in the session (the baseline and every judged round of
  the stage: the starting values overlaid with the changes kept before it and the round's own) is told
  to the study with its measured objective (median of the candidate's runs). The nearest experiences'
  best configurations (already retrieved by fingerprint) are queued as the first suggestions.
* **Infeasible suggestions.** A suggestion the validator refuses (the planning retry carries the
  failed checks back, or the round ends rejected) or whose trial failed is told to the study as a
  failed trial: TPE ignores it, and it cost no measurement.
* **Ruled-out knobs.** A knob banned after the search started (a check that rules it out for the
  session, ``planner.base.bans_knob``, or a person's rejection in approval mode) leaves the subspace:
  the search is built again without it (warm-started from the same measurements), so its suggestions
  never reduce to "no change".

Before either, a memory-budget refusal of growing the data cache is answered with a trade move
(``agenticdb.planner.trade``). The stop rule for the search lives with the loop's next move (``next_move.decide``:
``loop.search_patience``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import optuna
import structlog

from agenticdb.models import ApplyMode, Bottleneck, Change, KnobSpec, Layer, Proposal
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.base import Planner, bans_knob
from agenticdb.planner.caps import host_cap
from agenticdb.planner.diagnosis import diagnose
from agenticdb.planner.heuristic import _family as family_of_context
from agenticdb.planner.playbook import load_playbook, round_base
from agenticdb.planner.trade import refused_growth, trade_proposal
from agenticdb.units import canonical, format_value, parse_value, readable, unit_bytes

log = structlog.get_logger(__name__)

optuna.logging.set_verbosity(optuna.logging.WARNING)

#: Size knobs are searched up to this fraction of the memory limit; the validator's budget decides the rest.
MEMORY_CAP_FRACTION = 0.5


@dataclass(frozen=True)
class SearchSettings:
    """How the refinement stage searches.

    Attributes:
        max_knobs: knobs in the subspace (``loop.search_knobs``).
        switch_after: playbook rounds of a stage in a row without a kept gain after which the search
            takes over even if the playbook still has prescriptions (``loop.plateau_rounds``).
        max_infeasible: suggestions in a row refused by the validator after which the search gives up
            (plateau).
        startup_trials: TPE's random start-up trials (warm-start trials count towards them).
        seed: the sampler's seed (reproducible suggestions).
    """

    max_knobs: int = 3
    switch_after: int = 3
    max_infeasible: int = 12
    startup_trials: int = 4
    seed: int = 0


@dataclass
class _Pending:
    """The suggestion waiting for its outcome: the trial, the changes proposed, rounds seen at ask time."""

    number: int
    changes: dict[str, str]
    at: int


@dataclass
class _Search:
    """One stage's study, its subspace and what is not told yet."""

    study: optuna.Study
    space: dict[str, optuna.distributions.FloatDistribution]
    specs: dict[str, KnobSpec]
    bottleneck: Bottleneck
    why: str
    pending: _Pending | None = None
    infeasible_streak: int = 0
    notes: list[str] = field(default_factory=list)


def _numeric(spec: KnobSpec | None, value: str | None) -> float | None:
    if spec is None or value is None:
        return None
    return parse_value(value, spec)


def subspace(
    ctx: PlanningContext, family: str, max_knobs: int, banned: set[str]
) -> tuple[dict[str, optuna.distributions.FloatDistribution], dict[str, KnobSpec], Bottleneck, str]:
    """The knobs and log-scaled ranges to search, from the top diagnosed bottlenecks.

    Returns (distributions by knob in base units, specs, the top bottleneck, a one-line reason).
    Empty when no numeric, tunable knob of the playbook's entries has a positive current value.
    """
    delta = ctx.last_delta or ctx.profile.baseline_state
    measurement = ctx.profile.baseline[-1] if ctx.profile.baseline else None
    hyps = diagnose(delta, ctx.profile, family, ctx.stage, measurement) if delta is not None else []
    book = load_playbook(family)
    # knobs the session's kept rounds moved (most recent first), then the playbook's knobs for the
    # hypotheses in score order (those that score first), then the rest of the playbook
    kept = [r for r in reversed(ctx.rounds) if r.stage == ctx.stage and r.kept and r.failure is None]
    candidates = [(name, r.bottleneck) for r in kept for name in r.changes]
    scored = [h.bottleneck for h in hyps if h.score > 0] + [h.bottleneck for h in hyps]
    for b in dict.fromkeys(scored + [e.bottleneck for e in book.entry]):
        candidates += [(e.knob, b) for e in book.entries_for(b)]
    current = {**ctx.profile.current_config, **ctx.current_config}
    space: dict[str, optuna.distributions.FloatDistribution] = {}
    specs: dict[str, KnobSpec] = {}
    used: list[Bottleneck] = []
    for name, b in candidates:
        dist = None if len(space) >= max_knobs or name in space else _range(ctx, name, current, banned)
        if dist is not None:
            space[name], specs[name] = dist, ctx.catalog.knobs[name]
            used += [b] if b not in used else []
    top = used[0] if used else Bottleneck.unknown
    scores = {h.bottleneck: h.score for h in hyps}
    why = ", ".join(f"{b.value} (score {scores.get(b, 0.0):.2f})" for b in used)
    return space, specs, top, why


def _range(
    ctx: PlanningContext, name: str, current: dict[str, str], banned: set[str]
) -> optuna.distributions.FloatDistribution | None:
    """``[start / f, start × f]`` in base units, clipped to the catalog and the memory cap; None when the
    knob cannot be searched (unknown here, not numeric, banned, restart not allowed, special value)."""
    spec = ctx.catalog.knobs.get(name)
    if spec is None or spec.layer != ctx.stage or name in banned or spec.vartype not in ("integer", "real"):
        return None
    if spec.apply == ApplyMode.restart and not ctx.allow_restart:
        return None
    start = _numeric(spec, current.get(name, spec.default))
    if start is None or start <= 0:
        return None  # 0 / -1 mean "off" or "auto": no scale to search around
    f = max(ctx.max_step_factor, 1.5)
    lo, hi = start / f, start * f
    if spec.vartype == "integer":
        lo = max(lo, 1.0)  # never round down into a special value (0 = off)
    if spec.min_value is not None:
        lo = max(lo, spec.min_value)
    if spec.max_value is not None:
        hi = min(hi, spec.max_value)
    ub = unit_bytes(spec.unit)
    mem = ctx.profile.hardware.memory_limit_bytes or ctx.profile.hardware.memory_bytes
    if ub and mem:
        hi = min(hi, MEMORY_CAP_FRACTION * mem / ub)
    if (cap := host_cap(ctx, name)) is not None:
        hi = min(hi, cap)
    if lo <= 0 or hi <= lo * 1.01:
        return None
    return optuna.distributions.FloatDistribution(lo, hi, log=True)


def _banned(ctx: PlanningContext) -> set[str]:
    """Knobs ruled out for the session: a check that bans them (``planner.base.bans_knob``: protected,
    durability, a person's rejection, ...) in an earlier round or in this round's planning retry."""
    rounds = {fc.parameter for r in ctx.rounds for fc in r.failed_checks if bans_knob(fc.check)}
    return rounds | {fc.parameter for fc in ctx.validator_feedback if bans_knob(fc.check)}


def _measured_configs(ctx: PlanningContext) -> list[tuple[dict[str, str], float]]:
    """(configuration, objective) of every measurement of the stage: the baseline, then each judged round
    (the starting values overlaid with the changes kept before it and the round's own changes)."""
    config = dict(ctx.profile.current_config)
    out: list[tuple[dict[str, str], float]] = []
    baseline = [m.objective for m in ctx.profile.baseline]
    if baseline and ctx.stage == Layer.dbms:
        out.append((dict(config), sorted(baseline)[len(baseline) // 2]))
    for r in ctx.rounds:
        if r.stage != ctx.stage:
            continue
        value = r.objective if r.objective is not None else (r.measurement.objective if r.measurement else None)
        if r.verdict_ok and r.failure is None and value is not None:
            out.append(({**config, **r.changes}, value))
        if r.kept and r.failure is None:
            config.update(r.changes)
    return out


class RefiningPlanner(Planner):
    """The playbook planner first, then model-based search (see the module docstring).

    Args:
        inner: the playbook planner (heuristic, or LLM with the heuristic fallback).
        settings: subspace size, switch rule, seed.
    """

    def __init__(self, inner: Planner, settings: SearchSettings | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.refines = True
        self.settings = settings or SearchSettings()
        self._searches: dict[Layer, _Search] = {}
        self._exhausted: dict[Layer, str] = {}
        self._traded: set[tuple[str, str]] = set()

    def usage(self) -> dict[str, float]:
        """The inner planner's accounting (the search calls nothing outside)."""
        return self.inner.usage()

    def propose(self, ctx: PlanningContext) -> Proposal:
        """The playbook's proposal while it has one, else the search's next suggestion.

        Raises:
            PlannerError: from the inner planner, or the DBMS family cannot be told.
        """
        trade = self._trade(ctx)
        if trade is not None:
            return trade
        search = self._searches.get(ctx.stage)
        if search is None and ctx.stage not in self._exhausted:
            why = self._playbook_stalled(ctx)
            if not why:
                p = self.inner.propose(ctx)
                if p.changes and not p.plateau:
                    return p.model_copy(update={"stage": "playbook"})
                why = p.rationale or "the playbook has nothing left"
            search = self._start(ctx, why)
        if search is None:
            return self._plateau(ctx, self._exhausted.get(ctx.stage, "search has nothing to search"))
        return self._suggest(ctx, search)

    def _trade(self, ctx: PlanningContext) -> Proposal | None:
        """A trade move (``agenticdb.planner.trade``) when the memory budget just refused growing the data
        cache; each refused value is traded once. The pending search suggestion is told first."""
        refused = refused_growth(ctx)
        if refused is None or (refused.parameter, refused.value) in self._traded:
            return None
        self._traded.add((refused.parameter, refused.value))
        search = self._searches.get(ctx.stage)
        if search is not None:
            self._tell_pending(ctx, search)
        return trade_proposal(ctx, family_of_context(ctx), refused, "trade")

    # ------------------------------------------------------------------ switching

    def _playbook_stalled(self, ctx: PlanningContext) -> str:
        """Why the playbook is set aside although it may still prescribe, or ''."""
        n = self.settings.switch_after
        mine = [
            r for r in ctx.rounds if r.stage == ctx.stage and r.proposal is not None and r.verdict_ok and not r.opening
        ]
        recent = mine[-n:]
        if n > 0 and len(recent) >= n and not any(r.kept for r in recent):
            return f"{n} playbook rounds in a row were not kept (rounds {', '.join(str(r.round_no) for r in recent)})"
        return ""

    def _start(self, ctx: PlanningContext, why: str) -> _Search | None:
        family = family_of_context(ctx)
        space, specs, top, picked = subspace(ctx, family, self.settings.max_knobs, _banned(ctx))
        if not space:
            self._exhausted[ctx.stage] = f"{why}; no numeric knob of the diagnosed bottlenecks to search"
            return None
        higher = ctx.profile.baseline[0].higher_is_better if ctx.profile.baseline else True
        sampler = optuna.samplers.TPESampler(
            seed=self.settings.seed, n_startup_trials=self.settings.startup_trials, multivariate=True
        )
        study = optuna.create_study(direction="maximize" if higher else "minimize", sampler=sampler)
        warm = self._warm_start(ctx, study, space, specs)
        queued = self._queue_experience(ctx, study, space, specs)
        search = _Search(study, space, specs, top, f"{why}; searching {', '.join(space)} for {picked}")
        search.notes.append(
            f"warm start: {warm} measured configuration(s) of this session told to TPE, "
            f"{queued} experience configuration(s) queued"
        )
        self._searches[ctx.stage] = search
        log.info("search.started", stage=ctx.stage.value, knobs=list(space), warm=warm, queued=queued, why=why)
        return search

    def _warm_start(
        self,
        ctx: PlanningContext,
        study: optuna.Study,
        space: dict[str, optuna.distributions.FloatDistribution],
        specs: dict[str, KnobSpec],
    ) -> int:
        told = 0
        for config, value in _measured_configs(ctx):
            params = {}
            for name, dist in space.items():
                v = _numeric(specs[name], config.get(name, specs[name].default))
                if v is None or not dist.low <= v <= dist.high:
                    break
                params[name] = v
            else:
                study.add_trial(optuna.trial.create_trial(params=params, distributions=dict(space), value=value))
                told += 1
        return told

    def _queue_experience(
        self,
        ctx: PlanningContext,
        study: optuna.Study,
        space: dict[str, optuna.distributions.FloatDistribution],
        specs: dict[str, KnobSpec],
    ) -> int:
        """Queue each retrieved experience's best configuration (sizes rescaled by its fraction of memory,
        clipped into the ranges) as a suggestion to measure first."""
        mem = ctx.profile.hardware.memory_limit_bytes or ctx.profile.hardware.memory_bytes
        queued = 0
        for exp in ctx.experience:
            params: dict[str, float] = {}
            for name, dist in space.items():
                v = _numeric(specs[name], exp.best_config.get(name))
                frac = exp.best_config_relative.get(name, {}).get("fraction_of_memory")
                ub = unit_bytes(specs[name].unit)
                if isinstance(frac, int | float) and ub and mem:
                    v = frac * mem / ub
                if v is not None:
                    params[name] = min(max(v, dist.low), dist.high)
            if params:
                study.enqueue_trial(params, skip_if_exists=True)
                queued += 1
        return queued

    # ------------------------------------------------------------------ suggesting

    def _tell_pending(self, ctx: PlanningContext, s: _Search) -> None:
        """Tell the study how the last suggestion ended: refused (infeasible), failed, or its objective."""
        p = s.pending
        if p is None:
            return
        s.pending = None
        if ctx.validator_feedback:
            checks = "; ".join(f"[{fc.check}] {fc.parameter}={fc.value}" for fc in ctx.validator_feedback)
            self._infeasible(s, p, f"refused by the validator ({checks})")
            return
        r = ctx.rounds[p.at] if len(ctx.rounds) > p.at else None
        if r is None or r.proposal is None or r.proposal.stage != "search":
            self._infeasible(s, p, "not tried")
            return
        value = r.objective if r.objective is not None else (r.measurement.objective if r.measurement else None)
        if not r.verdict_ok:
            self._infeasible(s, p, "refused by the validator: " + "; ".join(fc.message for fc in r.failed_checks[-1:]))
        elif r.failure is not None or value is None:
            self._infeasible(s, p, f"trial failed ({r.failure.message if r.failure else 'no measurement'})")
        else:
            s.study.tell(p.number, value)
            s.infeasible_streak = 0
            log.info("search.told", trial=p.number, objective=value, judged=r.judged, kept=r.kept)

    def _infeasible(self, s: _Search, p: _Pending, why: str) -> None:
        s.study.tell(p.number, state=optuna.trial.TrialState.FAIL)
        s.infeasible_streak += 1
        s.notes.append(f"suggestion {p.number} ({_text(p.changes)}) told to TPE as infeasible: {why}")
        log.info("search.infeasible", trial=p.number, changes=p.changes, why=why)

    def _suggest(self, ctx: PlanningContext, s: _Search) -> Proposal:
        self._tell_pending(ctx, s)
        # a knob ruled out since the search started stays at its current value: the subspace is built again
        # without it (the new subspace holds no banned knob, so no suggestion needs filtering)
        if dropped := sorted(_banned(ctx) & s.space.keys()):
            del self._searches[ctx.stage]
            log.info("search.rebuilt", stage=ctx.stage.value, dropped=dropped, why="banned since the search started")
            rebuilt = self._start(ctx, f"{s.why}; rebuilt without {', '.join(dropped)} (ruled out)")
            if rebuilt is None:
                return self._plateau(ctx, self._exhausted[ctx.stage])
            s = rebuilt
        family = family_of_context(ctx)
        current = {**ctx.profile.current_config, **ctx.current_config}
        tried = {canonical(n, v, ctx.catalog.get(n)) for r in ctx.rounds for n, v in r.changes.items()}
        for _ in range(self.settings.max_infeasible):
            if s.infeasible_streak >= self.settings.max_infeasible:
                break
            trial = s.study.ask(dict(s.space))
            changes = self._changes(trial.params, s.specs, current, family)
            keys = {canonical(n, v, s.specs[n]) for n, v in changes.items()}
            if not changes or keys <= tried:
                why = "no change after rounding" if not changes else "already measured in this session"
                self._infeasible(s, _Pending(trial.number, changes, len(ctx.rounds)), why)
                continue
            s.pending = _Pending(trial.number, changes, len(ctx.rounds))
            return self._proposal(ctx, s, changes, trial.number)
        self._exhausted[ctx.stage] = (
            f"search gave up: {s.infeasible_streak} suggestions in a row were infeasible or already measured"
        )
        del self._searches[ctx.stage]
        return self._plateau(ctx, self._exhausted[ctx.stage])

    @staticmethod
    def _changes(
        params: dict[str, float], specs: dict[str, KnobSpec], current: dict[str, str], family: str
    ) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, raw in params.items():
            spec = specs[name]
            value = format_value(round_base(raw, spec), spec, family)
            if canonical(name, value, spec) != canonical(name, current.get(name, spec.default or ""), spec):
                out[name] = str(value)
        return out

    def _proposal(self, ctx: PlanningContext, s: _Search, changes: dict[str, str], number: int) -> Proposal:
        specs = [s.specs[n] for n in changes]
        family = family_of_context(ctx)
        notes, s.notes = s.notes, []
        current = {**ctx.profile.current_config, **ctx.current_config}
        complete = len([t for t in s.study.trials if t.state == optuna.trial.TrialState.COMPLETE])
        rationale = (
            f"refinement search (Optuna {optuna.__version__} TPE, suggestion {number}, {complete} measured "
            f"configuration(s) known): {s.why}." + "".join(f" {n}." for n in notes)
        )
        log.info("search.suggested", stage=ctx.stage.value, trial=number, changes=changes)
        return Proposal(
            bottleneck=s.bottleneck,
            layer=ctx.stage,
            changes=[
                Change(
                    name=n,
                    value=v,
                    rationale=f"TPE suggestion in [{_span(s.space[n], s.specs[n], family)}] "
                    f"({n}: {current.get(n)} → {v})",
                )
                for n, v in changes.items()
            ],
            intended_effects=[f"{n}: explore the response surface around the best configuration" for n in changes],
            apply_requirement=ApplyMode.strongest([sp.apply for sp in specs]),
            rationale=rationale,
            planner="search",
            stage="search",
        )

    def _plateau(self, ctx: PlanningContext, why: str) -> Proposal:
        log.info("search.plateau", stage=ctx.stage.value, reason=why)
        return Proposal(
            bottleneck=Bottleneck.unknown,
            layer=ctx.stage,
            changes=[],
            plateau=True,
            rationale=f"plateau: {why}",
            planner="search",
            stage="search",
        )


def _text(changes: dict[str, str]) -> str:
    return ", ".join(f"{n}={v}" for n, v in changes.items()) or "no change"


def _span(dist: optuna.distributions.FloatDistribution, spec: KnobSpec, family: str) -> str:
    """The search range with each end in the knob's own spelling ("50ms .. 800ms, log scale";
    "1MB .. 64MB"), not a bare number times the unit (issue 39's "[50 .. 800 × ms]")."""
    lo, hi = (readable(family, spec, round(v) if spec.vartype == "integer" else v) for v in (dist.low, dist.high))
    return f"{lo} .. {hi}, log scale"


def expected_gain_text(gains: Sequence[float | None]) -> str:
    """Gains as percentages for stop reasons ("+1.2 %, -0.4 %")."""
    return ", ".join("n/a" if g is None or math.isnan(g) else f"{g:+.1%}" for g in gains)
