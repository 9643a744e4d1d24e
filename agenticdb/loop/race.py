"""The opening's race (issue 36 points 2 and 5): whole configurations screened once each, at a bounded cost.

The opening's candidates (``agenticdb.planner.opening``: whole configurations, each validated as one set)
are raced before the diagnosis rounds:

* **One screen each, against the best so far.** Each candidate is applied as ONE change set through the
  executor (dynamic / reload / restart as the executor does, verified in effect; a failed apply or a
  failed run goes to recovery as in any round) and measured once. The run is bounded by the best run so
  far (the baseline's median run, then the best screen): an OLTP run is stopped by the progress-line rule
  once its steady median TPS is below 1 / ``loop.race_time_factor`` of the best's (1.5 × worse by
  default); a query set (TPC-H) under a timeout of ``loop.race_time_factor`` × the best's time, in total
  and per query with a floor for millisecond queries (``TrialLimit.race``; λ-Tune's bound, Giannakouris &
  Trummer, SIGMOD 2025: evaluation cost bounded by a function of the best run time). A stopped run is a
  **cut_off**: a screen result (the candidate is far worse), never a WorkloadError and never a failed
  round or a "failed" lesson in experience memory.
* **Few restarts.** Candidates are ordered so that those which leave the restart-only knobs as the
  starting configuration has them go first and candidates sharing the same restart-only values follow
  each other (:func:`race_order`); switching from one candidate to the next changes only what differs
  (:func:`switch_changes`), so candidates sharing their restart-only values cost one restart, not K.
* **The leader is proven on fresh pairs.** The race's runs selected the leader (the best of K noisy runs,
  biased upward), so they are never its evidence: the session proves it with the sequential paired test
  against the starting configuration on fresh runs (``TuningSession`` round after the screens; one proof
  per race). Kept, it is the best configuration; not proven, the starting configuration is put back.
  Only a leader whose screen is not behind the start's level beyond the noise is proven
  (:func:`behind_start`): when even the best screen is, no candidate is ahead of the start and a proof
  would spend the decision's runs to confirm it; the start is put back at once.
* **Every screen is recorded**: a round outcome per screen (session memory, the Memory Book, the
  refinement search's history: ``planner.search`` warm-starts from every measured configuration), and a
  ``race`` journal event with its table (:func:`race_table`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from agenticdb.config.loop_section import LoopConfig
from agenticdb.dialect import family_of
from agenticdb.loop.auditor import cut_off as counted_cut_off
from agenticdb.loop.next_move import RESTART_PRIOR_S, noise_cv, relative_gain
from agenticdb.measure.query_set import QueryWeights
from agenticdb.measure.sequential import Noise
from agenticdb.measure.series import PAIR_SD_FLOOR
from agenticdb.measure.trial_limit import TrialLimit
from agenticdb.models import ApplyMode, Catalog, Failure, KnobSpec, Measurement, NormalizedChange
from agenticdb.report.labels import OBJECTIVES
from agenticdb.units import UnitError, canonical, normalize

#: How far the leader's screen may fall behind the start's level and still be proven, in standard deviations of
#: one pair's log-ratio (the session's noise estimate): judgement. The leader is the best of K screens, so a
#: configuration as good as the start falls this far behind in its one run with less than ~2.3 % chance
#: (normal, one-sided); further behind, it is not ahead of the start and its proof would be wasted runs.
BEHIND_SDS = 2.0

#: How far a screen other than the leader's must run ahead of the start's level for its changes to join the
#: leader's in the proof, in the same standard deviations (judgement, the mirror of BEHIND_SDS: a configuration
#: only as good as the start runs this far ahead in one run with less than ~2.3 % chance).
AHEAD_SDS = 2.0


PER_QUERY = "the per-query statistic"
"""What a query set's screens are ranked on and its proof is judged on (``QueryWeights.log_ratio``), in words."""


def measure_name(m: Measurement) -> str:
    """What a run's objective measures, in words for a gain (``report.labels.OBJECTIVES``: "total time",
    "TPS", "TPS/p95"; "the objective" for a name without a label)."""
    return OBJECTIVES[m.objective_name][0] if m.objective_name in OBJECTIVES else "the objective"


@dataclass
class Screen:
    """One candidate's screen in the race.

    Attributes:
        name: the candidate's source ("host-sized", "evidence", "limits", "experience", "llm", or a test's).
        round_no: the session round that screened it.
        changes: the whole configuration as changes from the starting one (canonical values).
        apply: how the switch to it took effect ("dynamic", "reload", "restart"; "" when not applied).
        measurement: its one run (None when refused or failed).
        failure: the apply or run failure (recovery put the starting configuration back).
        refused: why the validator refused the set ("" when it passed).
        seconds: wall time of the screen (apply + warm-up + run).
    """

    name: str
    round_no: int
    changes: dict[str, str]
    apply: str = ""
    measurement: Measurement | None = None
    failure: Failure | None = None
    refused: str = ""
    seconds: float = 0.0

    @property
    def cut_off(self) -> str:
        """Why the run was stopped early by the race's bound ('' when it ran to the end)."""
        return self.measurement.cut_off or "" if self.measurement is not None else ""

    @property
    def disturbed(self) -> bool:
        """The host disturbed the run (its level says little)."""
        m = self.measurement
        return m is not None and m.disturbed

    @property
    def ranked(self) -> bool:
        """Whether the screen may lead the race: measured to the end, not disturbed."""
        return self.measurement is not None and not self.cut_off and not self.disturbed

    def result(self, best_level: float, higher: bool, per_query: float | None = None) -> str:
        """The screen's result in words: objective and gain on the starting level, each gain named by what it
        measures (``+4.4% on the starting level by total time``; with ``per_query``, the screen's log-ratio
        ``d = Σ w_q ln(b_q/c_q)`` on the start's run, also ``+12.0% by the per-query statistic``: the statistic
        the race ranks query sets on and the proof judges), then cut-off, failure. A new user's demo read
        "+4.4 %" for host-sized in the race table and "+12.0 %" for it in the proof's rationale, unlabelled."""
        if self.refused:
            return f"refused by the validator: {self.refused}"
        if self.failure is not None and self.failure.outside:  # not the candidate's failure (runwatch.Interrupted)
            return f"interrupted: {self.failure.message}"
        if self.failure is not None:
            return f"failed in {self.failure.phase}: {self.failure.message}"
        if self.measurement is None:
            return "not measured"
        m = self.measurement
        gain = relative_gain(m.objective, best_level, higher)
        by = f", {math.expm1(per_query):+.1%} by {PER_QUERY}" if per_query is not None else ""
        text = f"{m.objective:,.3f} ({gain:+.1%} on the starting level by {measure_name(m)}{by}, one run)"
        if self.disturbed:  # its figures measured the host's other load as much as the change: none is an effect
            text = f"{m.objective:,.3f} (one run the host disturbed: no gain counted)"
        elif per_query is not None:
            text += disagreement(gain, math.expm1(per_query))
        if self.cut_off:
            text += f"; cut_off: {self.cut_off}"
        if self.disturbed and m.disturbance is not None:
            text += f"; disturbed: {m.disturbance.reason}"
        return text


def disagreement(total_gain: float, per_query_gain: float) -> str:
    """What it means when a query set's total-time gain and its per-query statistic's gain (relative, positive =
    faster; "" when they agree in sign, or either rounds to ±0.0 %). Total time adds up seconds; the statistic
    ``d = Σ_q w_q ln(b_q/c_q)`` (docs/measurement.md "Query sets") averages each query's time ratio, weighted by
    its share of the baseline's time: a few queries slower by a large factor cost more seconds than the rest save
    while counting less in the average of ratios (by Jensen's inequality the statistic is never below the total's
    log-gain on the same reference run; the screen's total is taken on the starting level, the median baseline
    run, its statistic on the start's last run, which allows the other sign too)."""
    if abs(total_gain) < 0.0005 or abs(per_query_gain) < 0.0005 or (total_gain > 0) == (per_query_gain > 0):
        return ""
    slower, faster = ("slower", "faster") if total_gain < 0 else ("faster", "slower")
    lost = (
        "lost more seconds than the faster ones saved"
        if total_gain < 0
        else "saved more seconds than the slower ones lost"
    )
    return (
        f"; the two disagree: the queries that got {slower} {lost}, while by their time ratios, weighted by each "
        f"query's share of the baseline's time, the {faster} ones count more"
    )


@dataclass
class RaceState:
    """The race so far: its screens and the reference run that bounds the next one.

    ``reference`` is the best full run so far (the baseline's median run, then a screen that beat it) and
    ``reference_level`` its objective; the next screen is bounded by it (:func:`race_limit`).
    """

    reference: Measurement | None
    reference_level: float
    higher: bool
    screens: list[Screen] = field(default_factory=list)
    restarts: int = 0

    def add(self, screen: Screen) -> None:
        """Record ``screen``; a full, undisturbed run better than the reference becomes the reference."""
        self.screens.append(screen)
        m = screen.measurement
        if m is None or not screen.ranked:
            return
        better = m.objective > self.reference_level if self.higher else m.objective < self.reference_level
        if better:
            self.reference, self.reference_level = m, m.objective

    def leader(
        self,
        weights: QueryWeights | None = None,
        start_run: Measurement | None = None,
        start_level: float | None = None,
    ) -> Screen | None:
        """The best screen measured to the end and undisturbed, or None (every candidate cut off,
        disturbed, refused or failed).

        With the session's frozen per-query ``weights`` and the start's reference run (query sets), screens
        are ranked on ``QueryWeights.log_ratio`` against ``start_run`` — the statistic the proof is judged
        on — rather than on the total time, which one long query can dominate; else on the objective. A
        screen whose total time ran behind ``start_level`` (the start's median total, s) ranks after every
        screen whose total did not (:func:`total_behind`): its proof could not keep it, since a "better" on the
        statistic stands only if the pairs' total times agree (``auditor._total_time_agrees``). Seen on
        pg-tpch-fit (2026-12-07): host-sized led on the statistic (+11.6 %) with its total −11.3 %, was
        proven (5 pairs, a tie) while 'evidence' (+8.8 % total, +9.6 % statistic) was never proven.
        """
        ranked = [s for s in self.screens if s.ranked and s.measurement is not None]
        if not ranked:
            return None
        if weights is not None and start_run is not None:
            scored = [(weights.log_ratio(s.measurement, start_run), s) for s in ranked if s.measurement is not None]
            if all(d is not None for d, _ in scored):
                level = start_run.objective if start_level is None else start_level
                return max(scored, key=lambda t: (not total_behind(t[1], level), t[0] or 0.0))[1]
        pick = max if self.higher else min
        return pick(ranked, key=lambda s: s.measurement.objective if s.measurement is not None else 0.0)


def total_behind(screen: Screen, start_level: float) -> bool:
    """Whether a query-set screen's total time (its objective, s, lower is better) ran behind the start's level
    ``start_level`` (s) in its one run: the sign the proof's total-time guard (``auditor._total_time_agrees``) asks
    of the pairs, so such a screen can tie at best however far ahead its per-query statistic is."""
    m = screen.measurement
    return m is not None and start_level > 0 and m.objective > start_level


def passed_over(
    state: RaceState, leader: Screen | None, weights: QueryWeights | None, start_run: Measurement | None, level: float
) -> list[str]:
    """One line per screen ahead of ``leader`` on the per-query statistic that :meth:`RaceState.leader` ranked
    after it because its total time ran behind the start's ``level`` (s) (:func:`total_behind`), for the race's
    notes; [] when none was (or not a query set)."""
    if leader is None or weights is None or start_run is None or leader.measurement is None:
        return []
    lead_d = weights.log_ratio(leader.measurement, start_run)
    lines = []
    for sc in state.screens:
        m = sc.measurement
        d = weights.log_ratio(m, start_run) if sc.ranked and m is not None else None
        if sc is leader or m is None or d is None or lead_d is None or d <= lead_d or not total_behind(sc, level):
            continue
        lines.append(
            f"'{sc.name}' ranked after '{leader.name}': ahead by {PER_QUERY} ({math.expm1(d):+.1%}) but its total "
            f"time ran {relative_gain(m.objective, level, False):+.1%} on the starting level, and a proof keeps a "
            "query set's change only when the pairs' total times agree"
        )
    return lines


def behind_start(
    screen: Screen,
    start_run: Measurement | None,
    start_level: float,
    higher: bool,
    noise: Noise,
    weights: QueryWeights | None = None,
) -> str:
    """Why the leader's screen is behind the starting configuration beyond the noise, or '' (then prove it).

    Args:
        screen: the race's leader (measured to the end, undisturbed).
        start_run: the starting configuration's reference run (the baseline's median run), for query sets.
        start_level: the starting configuration's level (the baseline's median objective).
        higher: the objective is higher-is-better.
        noise: the session's noise estimate of one pair's log-ratio (``TuningSession.noise``: for query sets
            on the per-query statistic), never taken below ``series.PAIR_SD_FLOOR`` (as in the proof).
        weights: the session's frozen per-query weights (query sets): the screen is then compared on
            ``QueryWeights.log_ratio`` against ``start_run``, the statistic the proof is judged on.

    Returns:
        '' when the screen's log-ratio against the start is at least ``-BEHIND_SDS`` × the pair's standard
        deviation; otherwise the reason, with the figures.
    """
    measured = _log_ratio(screen, start_run, start_level, higher, weights)
    if measured is None:
        return ""
    d, statistic = measured
    sd = _pair_sd(noise)
    if d >= -BEHIND_SDS * sd:
        return ""
    return (
        f"no candidate ahead of the start in its screen: the best, '{screen.name}', ran {math.expm1(d):+.1%} on the "
        f"starting level (by {statistic}, one run), beyond {BEHIND_SDS:g} × the noise of a pair ({sd:.1%})"
    )


def ahead_of_start(
    screen: Screen,
    start_run: Measurement | None,
    start_level: float,
    higher: bool,
    noise: Noise,
    weights: QueryWeights | None = None,
) -> tuple[float, str] | None:
    """(the screen's log-ratio on the starting level, positive = better; what it measures: "the per-query
    statistic", "total time", "TPS" …) when it ran ahead of the start by at least ``AHEAD_SDS`` × the pair's standard
    deviation, else None (arguments as :func:`behind_start`; a cut-off or disturbed run is never ahead, nor a
    query-set screen ahead on the per-query statistic whose total time ran behind the start, :func:`total_behind`)."""
    if screen.cut_off or screen.disturbed:
        return None
    measured = _log_ratio(screen, start_run, start_level, higher, weights)
    if measured is None:
        return None
    if measured[1] == PER_QUERY and total_behind(screen, start_level):
        return None  # ahead on the statistic, behind on the objective: its knobs would cost the leader total time
    return measured if measured[0] >= AHEAD_SDS * _pair_sd(noise) else None


def _pair_sd(noise: Noise) -> float:
    """One pair's log-ratio standard deviation: the session's estimate, never below the proof's per-pair floor
    (``series.PAIR_SD_FLOOR``), as in the proof's test; with none measured (a one-run baseline,
    ``loop.baseline``) the conservative run CV of ``next_move.noise_cv`` (10 %), √2 × it per pair."""
    if noise.df == 0:
        return math.sqrt(2.0) * noise_cv([])
    return max(math.sqrt(noise.var), PAIR_SD_FLOOR)


def _log_ratio(
    screen: Screen, start_run: Measurement | None, start_level: float, higher: bool, weights: QueryWeights | None
) -> tuple[float, str] | None:
    """(log-ratio of the screen's run on the start, positive = better; the statistic's name), or None when
    the screen has no usable run. Query sets with frozen weights: ``QueryWeights.log_ratio`` against
    ``start_run`` (the proof's statistic, :data:`PER_QUERY`); otherwise the objective against ``start_level``
    (named by :func:`measure_name`)."""
    m = screen.measurement
    if m is None or m.objective <= 0 or start_level <= 0:
        return None
    if weights is not None and start_run is not None:
        d = weights.log_ratio(m, start_run)
        if d is not None:
            return d, PER_QUERY
    ratio = math.log(m.objective / start_level) if higher else math.log(start_level / m.objective)
    return ratio, measure_name(m)


def per_query(screen: Screen, weights: QueryWeights | None, start_run: Measurement | None) -> float | None:
    """The screen's per-query statistic on the start (``QueryWeights.log_ratio`` of its run against ``start_run``,
    positive = faster), or None: not a query set, no start run, or a run without a score (cut off)."""
    m = screen.measurement
    if weights is None or start_run is None or m is None:
        return None
    return weights.log_ratio(m, start_run)


def counted_worse(screen: Screen, best_level: float, prior: Noise) -> bool:
    """Whether a screen counts as measured worse (``auditor.cut_off``: a cut-off run the host did not
    disturb, or a run far below the best level); such a round is "worse", a lesson "ineffective"."""
    m = screen.measurement
    return m is not None and bool(counted_cut_off(m, best_level, prior))


def race_limit(
    loop: LoopConfig, reference: Measurement | None, level: float, start_runs: Sequence[Measurement] = ()
) -> TrialLimit | None:
    """The bound of the next screen from the best run so far (``reference``, objective ``level``).

    Query sets (a run with per-query times): ``TrialLimit.race`` with ``k = loop.race_time_factor`` (total
    and per query, with its floor for millisecond queries). Each query's bound is taken from the slowest time
    that query took in ``reference`` or in any full run of ``start_runs`` (the baseline's runs): one query's
    time varies far more than the set's total on a loaded host — on 2026-12-06 (load average ~17 on 2 cores)
    two TPC-H SF 0.3 screens whose totals were level with the start (+1.3 %, +1.8 %) were cut because one
    query ran past 1.5 × the median baseline run's time of it — so a query is stopped only past ``k`` × what
    the start itself was seen to take (leaning in the candidate's favour, as a cut-off must). OLTP: the
    progress-line rule at ratio ``1 / loop.race_time_factor`` of the reference's TPS. None without a
    reference run (nothing to bound by).
    """
    if reference is None or reference.cut_off:
        return None
    k = loop.race_time_factor
    if reference.per_query_s and reference.total_time_s:
        limit = TrialLimit.race(reference, k=k)
        slowest = dict(reference.per_query_s)
        for run in start_runs:
            if run.cut_off or not run.per_query_s:
                continue
            for q, t in run.per_query_s.items():
                if q in slowest:
                    slowest[q] = max(slowest[q], t)
        return replace(limit, best_query_s=slowest)
    if reference.tps:
        return TrialLimit(best_objective=level, best_tps=reference.tps, ratio=1.0 / k)
    return None


def _restart_values(
    changes: dict[str, str], names: Sequence[str], start: dict[str, str], specs: dict[str, KnobSpec]
) -> tuple[tuple[str, str], ...]:
    """The restart-only knobs' values a configuration runs with (canonical), in ``names`` order."""
    return tuple(canonical(n, changes.get(n, start.get(n, "")), specs.get(n)) for n in names)


def restart_names(candidates: Sequence[dict[str, str]], specs: dict[str, KnobSpec]) -> list[str]:
    """The restart-only knobs any candidate changes (catalog apply mode), sorted."""
    names = {n for c in candidates for n in c if (spec := specs.get(n)) is not None and spec.apply == ApplyMode.restart}
    return sorted(names)


def race_order(candidates: Sequence[dict[str, str]], start: dict[str, str], specs: dict[str, KnobSpec]) -> list[int]:
    """The order to screen ``candidates`` (indexes) so the race restarts as little as it can.

    Candidates that keep every restart-only knob at the starting value go first (no restart), then the
    candidates grouped by their restart-only values, groups in the order of their first candidate and the
    generator's order within a group (its strongest first). Consecutive candidates of one group switch
    without a restart."""
    names = restart_names(candidates, specs)
    at_start = _restart_values({}, names, start, specs)
    keys = [_restart_values(c, names, start, specs) for c in candidates]
    first: dict[tuple[tuple[str, str], ...], int] = {}
    for i, k in enumerate(keys):
        first.setdefault(k, i)
    return sorted(range(len(candidates)), key=lambda i: (keys[i] != at_start, first[keys[i]], i))


def restarts_needed(ordered: Sequence[dict[str, str]], start: dict[str, str], specs: dict[str, KnobSpec]) -> int:
    """How many restarts screening ``ordered`` from the starting configuration takes."""
    names = restart_names(ordered, specs)
    before = _restart_values({}, names, start, specs)
    count = 0
    for c in ordered:
        now = _restart_values(c, names, start, specs)
        count += now != before
        before = now
    return count


def switch_changes(
    wanted: list[NormalizedChange],
    previous: dict[str, str],
    start: dict[str, str],
    current: dict[str, str],
    catalog: Catalog,
    same: Callable[[str, str, str], bool],
) -> list[NormalizedChange]:
    """The one change set that turns the configuration in effect into the wanted one.

    Args:
        wanted: the candidate's whole set (normalised by the validator against the starting values).
        previous: the changes of the configuration in effect (the last screened candidate), by name.
        start: the starting configuration's values (a knob the previous candidate changed and this one
            does not goes back to it).
        current: the values in effect now.
        catalog: the stage's knobs (specs for the values put back).
        same: ``Target.values_equal(name, expected, actual)``.

    Returns:
        Only what differs from ``current``, with ``previous`` set to the value in effect; a value put back
        to the start is normalised like the validator does (it is the value the session started with).

    Raises:
        UnitError: a starting value cannot be normalised (not expected: the server reported it).
    """
    family = family_of(catalog.target)
    out: list[NormalizedChange] = []
    mine = {c.name for c in wanted}
    for c in wanted:
        now = current.get(c.name)
        if now is None or not same(c.name, c.value, now):
            out.append(c.model_copy(update={"previous": now}))
    for name in sorted(set(previous) - mine):
        spec, value, now = catalog.knobs.get(name), start.get(name), current.get(name)
        if spec is None or value is None or (now is not None and same(name, value, now)):
            continue
        parsed = normalize(family, spec, value)
        out.append(
            NormalizedChange(
                name=spec.name,
                value=parsed.canonical,
                base_value=parsed.base_value,
                unit=spec.unit,
                apply=spec.apply,
                layer=spec.layer,
                previous=now,
                runtime_only=spec.option_file is False,
            )
        )
    return out


def race_table(
    state: RaceState,
    best_level: float,
    prior: Noise,
    weights: QueryWeights | None = None,
    start_run: Measurement | None = None,
) -> list[dict[str, object]]:
    """The race's table for the journal's ``race`` event: one row per screen, in race order. ``gain_on_start`` is
    the objective's (``measured_by`` names it: "total time", "TPS" …); with the session's query weights and the
    start's run, ``per_query_gain`` is the per-query statistic's ``exp(d) − 1`` (else None)."""
    rows: list[dict[str, object]] = []
    for s in state.screens:
        m = s.measurement
        d = per_query(s, weights, start_run)
        rows.append(
            {
                "round": s.round_no,
                "candidate": s.name,
                "source": s.name,
                "knobs": dict(s.changes),
                "apply": s.apply,
                "objective": m.objective if m is not None else None,
                "gain_on_start": relative_gain(m.objective, best_level, state.higher) if m is not None else None,
                "measured_by": measure_name(m) if m is not None else None,
                "per_query_gain": math.expm1(d) if d is not None else None,
                "cut_off": bool(s.cut_off),
                "cut_off_reason": s.cut_off,
                "counted_worse": counted_worse(s, best_level, prior),
                "disturbed": s.disturbed,
                "failed": s.failure.message if s.failure is not None and not s.failure.outside else "",
                "interrupted": s.failure.outside if s.failure is not None else "",
                "refused": s.refused,
                "seconds": round(s.seconds, 1),
                "result": s.result(best_level, state.higher, d),
            }
        )
    return rows


def race_lines(event: dict[str, object]) -> list[str]:
    """The ``race`` journal event as lines for people (``journal story``): one per screened candidate with
    its knobs and result, then the leader (or why the race did not run), then the opening's notes (sources
    absent, sets dropped, evidence not measured and why)."""
    notes = event.get("notes")
    told = [f"note: {n}" for n in dict.fromkeys(notes)] if isinstance(notes, list) else []  # once each
    if event.get("skipped"):
        return [f"opening skipped: {event['skipped']}", *told]
    rows = event.get("table")
    lines = []
    for row in rows if isinstance(rows, list) else []:
        knobs = row.get("knobs") if isinstance(row, dict) else None
        text = ", ".join(f"{k}={v}" for k, v in knobs.items()) if isinstance(knobs, dict) else ""
        lines.append(f"round {row.get('round')} {row.get('candidate')}: {text} → {row.get('result')}")
    leader = event.get("leader")
    if event.get("stopped"):  # the session's stop request ended the race (OpeningRun._stopped)
        lines.append(f"{event['stopped']}: the start stays")
    elif event.get("not_proven"):
        lines.append(f"{event['not_proven']}: the start stays")
    elif leader and event.get("joined") and event.get("proven"):
        lent = "; ".join(str(x) for x in event["joined"]) if isinstance(event["joined"], list) else ""
        lines.append(f"leader: {leader}, joined by the knobs of {lent}: '{event['proven']}' proven next on fresh pairs")
    else:
        lines.append(f"leader: {leader} (proven next on fresh pairs)" if leader else "no leader: the start stays")
    return lines + told


def left_out_note(name: str, screens: int, cost_s: float, left_s: float) -> str:
    """Why candidate ``name`` was left out of the race: ``screens`` screens (it among them) and the proof cost
    ``cost_s`` seconds by :func:`opening_cost_s`, more than the ``left_s`` seconds of the time budget left. The
    most generic candidate is left out first (``most_generic``). A new user's demo raced 1 of 3 candidates and
    neither ``tune`` nor ``journal show`` said why (only the log's ``opening.budget_drop``); another read "(the
    most generic candidate goes first)" as if the candidate left out had run first."""
    return (
        f"'{name}' left out of the race: {screens} screens and the proof cost {math.ceil(cost_s)}s by the cost prior, "
        f"more than the {math.floor(max(left_s, 0))}s of the time budget left "
        "(the most generic candidate is left out first)"
    )


__all__ = [
    "AHEAD_SDS",
    "BEHIND_SDS",
    "RESTART_PRIOR_S",
    "RaceState",
    "Screen",
    "UnitError",
    "ahead_of_start",
    "behind_start",
    "counted_worse",
    "measure_name",
    "per_query",
    "race_limit",
    "race_lines",
    "race_order",
    "race_table",
    "restart_names",
    "restarts_needed",
    "switch_changes",
]
