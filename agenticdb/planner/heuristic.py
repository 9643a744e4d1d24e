"""The offline planner: a rule-based DBA (docs/architecture.md "Roles"; issue 6).

Each call diagnoses the bottleneck from the last runtime-state delta (:mod:`.diagnosis`), then
prescribes moves from the playbook (:mod:`.playbook`) in this order:

1. bad-start floors and known traps (a knob far below a sane floor for the hardware, commit_delay);
2. on the first proposal of a session, beneficial directions retrieved from experience memory,
   scaled to this host, avoiding changes that failed or did nothing before;
3. pushing further what the last round kept, with shrinking steps (×2, ×1.5, ×1.25), while the
   gain stays above ``min_gain``;
4. the best-scored hypothesis that is not exhausted (two unkept rounds in a row, an auditor
   ``redirect``, or nothing left to move);
5. when no hypothesis scores, a ``[[probe]]`` of the playbook (e.g. the data device's read-ahead in
   the OS stage) if the device it concerns is doing I/O — tried once, judged like any round.

Nothing is ever proposed twice: every tried, rejected or failed (name, canonical value) is
remembered, validator feedback bounds or bans the knob, and a direction that did not help is dead.
When nothing is left the proposal is empty with ``plateau=True``.
"""

from __future__ import annotations

import math

import structlog

from agenticdb.dialect import flavor_of_text
from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Change,
    Decision,
    FailedCheck,
    KnobSpec,
    Layer,
    Measurement,
    Proposal,
    RoundOutcome,
    StateDelta,
)
from agenticdb.models.planning import Experience, PlanningContext
from agenticdb.planner.base import Planner, PlannerError, bans_knob
from agenticdb.planner.diagnosis import Hypothesis, diagnose
from agenticdb.planner.move_builders import MoveBuilders, change_direction
from agenticdb.planner.moves import History, Move, Situation
from agenticdb.planner.playbook import (
    HostFacts,
    Playbook,
    load_playbook,
)
from agenticdb.planner.wording import floor_label
from agenticdb.units import canonical, parse_value

log = structlog.get_logger(__name__)


def _family(ctx: PlanningContext) -> str:
    if ctx.stage == Layer.os:
        return "linux"
    flavor = flavor_of_text(ctx.fingerprint.dbms, ctx.catalog.target, ctx.profile.target)
    if flavor is not None:
        return flavor
    raise PlannerError(
        f"fingerprint.dbms={ctx.fingerprint.dbms!r}: cannot tell the DBMS family "
        "(expected postgresql, mariadb or mysql)"
    )


def _current(ctx: PlanningContext) -> dict[str, str]:
    return {**ctx.profile.current_config, **ctx.current_config}


def _facts(ctx: PlanningContext, current: dict[str, str]) -> HostFacts:
    return HostFacts.of(ctx.profile.hardware, current)


def _round_changes(r: RoundOutcome) -> dict[str, str]:
    if r.changes:
        return r.changes
    if r.proposal is not None:
        return {c.name: str(c.value) for c in r.proposal.changes}
    return {}


class HeuristicPlanner(MoveBuilders, Planner):
    """Rule-based planner over the shipped playbooks.

    Args:
        min_gain: relative gain (0.03 = 3 %) a kept round needs for the direction to be pushed further;
            matches ``LoopConfig.min_gain``.
        min_score: hypotheses scoring below this are not acted on.
        unkept_limit: consecutive unkept rounds after which a bottleneck counts as exhausted.
    """

    name = "heuristic"

    def __init__(self, min_gain: float = 0.03, min_score: float = 0.15, unkept_limit: int = 2) -> None:
        self.min_gain = min_gain
        self.min_score = min_score
        self.unkept_limit = unkept_limit

    # ------------------------------------------------------------------------------ entry point

    # -- public API (used by ``advice.advise``: the same moves a tuning round would make, without a round)

    def history(self, ctx: PlanningContext, current: dict[str, str]) -> History:
        """What the session and retrieved experience rule out or bound, for the move builders below."""
        return self._history(ctx, current)

    def floor_moves(
        self,
        ctx: PlanningContext,
        book: Playbook,
        current: dict[str, str],
        facts: HostFacts,
        family: str,
        hist: History,
    ) -> list[Move]:
        """The playbook's ``[[floor]]`` moves (sizes below their floor, traps put back) for ``current``."""
        return self._floors(ctx, book, current, facts, family, hist)

    def entry_moves(
        self,
        ctx: PlanningContext,
        book: Playbook,
        hypothesis: Hypothesis,
        current: dict[str, str],
        facts: HostFacts,
        family: str,
        hist: History,
    ) -> list[Move]:
        """The playbook's ``[[entry]]`` moves for the bottleneck of ``hypothesis``."""
        return self._moves_for(ctx, book, hypothesis.bottleneck, hypothesis, current, facts, family, hist)

    def seed_moves(
        self,
        ctx: PlanningContext,
        current: dict[str, str],
        family: str,
        hist: History,
        by_b: dict[Bottleneck, Hypothesis],
        taken: set[str],
    ) -> list[Move]:
        """Moves seeded by retrieved experience (its beneficial changes), skipping knobs in ``taken``."""
        return self._seeds(ctx, current, family, hist, by_b, taken)

    def propose(self, ctx: PlanningContext) -> Proposal:
        """Diagnose and prescribe for ``ctx.stage`` (see the module docstring for the order): floors and
        retrieved experience first, then pushing a kept direction, then the diagnosed hypotheses, then a
        probe; else an empty proposal with ``plateau=True``.

        Raises:
            PlannerError: the DBMS family cannot be told from the context.
        """
        family = _family(ctx)
        current = _current(ctx)
        delta = ctx.last_delta or ctx.profile.baseline_state or StateDelta()
        s = Situation(
            ctx,
            load_playbook(family),
            current,
            _facts(ctx, current),
            family,
            delta,
            diagnose(delta, ctx.profile, family, ctx.stage, self._measurement(ctx)),
            self._history(ctx, current),
        )
        moves, why, avoid = self._opening(s)
        if moves:
            return self._proposal(ctx, moves[0].bottleneck, moves, s.hyps, s.hist, family, "; ".join(why) + ".")
        pushed = self._push(s)
        if pushed is not None:
            return pushed
        diagnosed, skipped = self._diagnosed(s, avoid)
        return diagnosed or self._probe_or_plateau(s, skipped)

    def _opening(self, s: Situation) -> tuple[list[Move], list[str], str]:
        """Floors and known traps, then (first proposal of the stage) directions retrieved from experience:
        (moves, reasons, what retrieved failures are avoided — said in any later branch too)."""
        ctx, hist = s.ctx, s.hist
        moves: list[Move] = []
        why: list[str] = []
        avoid = ""
        floors = self._floors(ctx, s.book, s.current, s.facts, s.family, hist)
        floors += self._measured(ctx, s.book, s.delta, s.current, hist)
        traps = [m for m in floors if m.trap]
        if traps and len(traps) < len(floors):
            # The known traps (commit_delay: -39% write TPS here) go first and alone: they are reload-only
            # and large, so their effect is measured cleanly instead of mixed with a restart's cold cache
            # and shutdown-checkpoint full-page images; the other floors follow in the next round.
            why.append(
                "fixing the worst offender first, alone: "
                + ", ".join(m.name for m in traps)
                + " (the other floor moves follow: "
                + ", ".join(m.name for m in floors if not m.trap)
                + ")"
            )
            floors = traps
        if floors:
            # The proposal is labelled by its first move: lead with a floor that agrees with the
            # diagnosis (jit_above_cost=0 under a CPU-bound diagnosis is a cpu fix, not a cache one).
            leader = max((h for h in s.hyps if h.plausible), key=lambda h: h.score, default=None)
            floors.sort(key=lambda m: leader is None or m.bottleneck != leader.bottleneck)
            moves += floors
            label = floor_label([m.start for m in floors])
            why.append(
                f"{label}: "
                + "; ".join(
                    f"{m.name}={m.current} → {m.value}" + (f" ({m.measured})" if m.measured else "") for m in floors
                )
            )
            if hist.retried:
                why.append("retrying a known trap's fix despite retrieved " + "; ".join(hist.retried))
        first_round = not any(r.stage == ctx.stage and not r.opening for r in ctx.rounds)
        if first_round and ctx.experience:
            seeds = self._seeds(ctx, s.current, s.family, hist, s.by_b, taken={m.name for m in moves})
            if seeds:
                moves += seeds[: max(0, ctx.max_changes - len(moves))]
                why.append(
                    "started from directions that helped on similar fingerprints: "
                    + ", ".join(f"{m.name}={m.value}" for m in seeds)
                )
            if hist.notes:
                avoid = "avoiding retrieved " + "; ".join(hist.notes)
                why.append(avoid)
        return moves[: ctx.max_changes], why, avoid

    def _push(self, s: Situation) -> Proposal | None:
        """The direction the last kept round took, pushed further with a smaller step (None: nothing to push)."""
        r = s.hist.push_from
        if r is None:
            return None
        hyp = s.by_b.get(r.bottleneck)
        only = set(_round_changes(r))
        pushed = self._moves_for(s.ctx, s.book, r.bottleneck, hyp, s.current, s.facts, s.family, s.hist, only=only)
        if not pushed:
            return None
        reason = (
            f"round {r.round_no} on {r.bottleneck.value} was kept with gain "
            f"{(r.gain_vs_best or 0):+.1%}; pushing the same direction with a smaller step."
        )
        return self._proposal(s.ctx, r.bottleneck, pushed, s.hyps, s.hist, s.family, reason)

    def _diagnosed(self, s: Situation, avoid: str) -> tuple[Proposal | None, list[str]]:
        """Moves for the best-scored hypothesis that is not exhausted: (the proposal or None, why each
        hypothesis before it was skipped). The rationale says "redirected from" only for directions the rounds
        left (``History.exhausted``: the last applied round's, wherever its hypothesis ranks now, and any ranked
        above the chosen one) and "passed over" for a higher-ranked one with no playbook move left: a new user's
        round 5 read "redirected from cpu: no playbook move left" after round 4's redirect from buffer_cache."""
        skipped: list[str] = []
        left = self._left(s)
        passed: list[str] = []
        for h in s.hyps:
            if h.bottleneck in s.hist.exhausted:
                skipped.append(f"{h.bottleneck.value}: {s.hist.exhausted[h.bottleneck]}")
                left.setdefault(h.bottleneck, skipped[-1])
                continue
            if h.score < self.min_score:
                continue
            moves = self._moves_for(s.ctx, s.book, h.bottleneck, h, s.current, s.facts, s.family, s.hist)
            if moves:
                lead = f"diagnosed {h.bottleneck.value} (score {h.score:.2f})"
                if left:
                    lead += "; redirected from " + "; ".join(left.values())
                if passed:
                    lead += "; passed over " + "; ".join(passed)
                if avoid:
                    lead += "; " + avoid
                return self._proposal(s.ctx, h.bottleneck, moves, s.hyps, s.hist, s.family, lead + "."), skipped
            notes = [n.message for n in s.book.notes_for(h.bottleneck)]
            skipped.append(f"{h.bottleneck.value}: no playbook move left" + (f" ({' '.join(notes)})" if notes else ""))
            passed.append(skipped[-1])
        return None, skipped

    @staticmethod
    def _left(s: Situation) -> dict[Bottleneck, str]:
        """{bottleneck: "buffer_cache: auditor redirected after round 4: …"} for the direction the stage's last
        applied round took when the rounds exhausted it (``History.exhausted``), else {}."""
        applied = [r for r in s.ctx.rounds if r.stage == s.ctx.stage and (r.verdict_ok or r.failure is not None)]
        last = applied[-1].bottleneck if applied else None
        if last is None or last not in s.hist.exhausted:
            return {}
        return {last: f"{last.value}: {s.hist.exhausted[last]}"}

    def _probe_or_plateau(self, s: Situation, skipped: list[str]) -> Proposal:
        """A low-risk probe of the playbook when no hypothesis scores; else the plateau (no changes)."""
        ctx, hyps = s.ctx, s.hyps
        probes = self._probes(ctx, s.book, s.delta, s.current, s.facts, s.family, s.hist)
        if probes:
            lead = (
                f"no {ctx.stage.value} hypothesis reached score {self.min_score:.2f}"
                + (f" ({'; '.join(skipped)})" if skipped else "")
                + "; trying a low-risk probe before calling a plateau"
            )
            return self._proposal(ctx, probes[0].bottleneck, probes, hyps, s.hist, s.family, lead + ".")
        reason = "plateau: nothing promising left — " + (
            "; ".join(skipped + s.hist.skipped) or f"no hypothesis above {self.min_score:.2f}"
        )
        top = hyps[0].bottleneck if hyps and hyps[0].score >= self.min_score else Bottleneck.unknown
        log.info("planner.plateau", stage=ctx.stage.value, reason=reason)
        return Proposal(
            bottleneck=top,
            layer=ctx.stage,
            changes=[],
            plateau=True,
            rationale=reason,
            evidence=self._evidence(hyps, top),
            ruled_out=self._ruled_out(hyps, s.hist, top),
            planner=self.name,
        )

    # -------------------------------------------------------------------------------- history

    def _measurement(self, ctx: PlanningContext) -> Measurement | None:
        for r in reversed(ctx.rounds):
            if r.measurement is not None:
                return r.measurement
        return ctx.profile.baseline[-1] if ctx.profile.baseline else None

    def _bound(
        self,
        hist: History,
        check: FailedCheck | None,
        name: str,
        value: str,
        spec: KnobSpec | None,
        current: dict[str, str],
    ) -> None:
        """Remember a rejected/failed value: adjustable checks bound the knob, others ban it."""
        hist.forbidden.add(canonical(name, value, spec))
        if check is not None and bans_knob(check.check):
            hist.banned[name] = f"[{check.check}] {check.message}"
            return
        if spec is None:
            return
        v, cur = parse_value(value, spec), parse_value(current.get(name, spec.default), spec)
        if v is None or cur is None:
            return
        if v > cur:
            hist.bound_up[name] = min(v, hist.bound_up.get(name, math.inf))
        elif v < cur:
            hist.bound_down[name] = max(v, hist.bound_down.get(name, -math.inf))

    def _history(self, ctx: PlanningContext, current: dict[str, str]) -> History:
        hist = History()
        cat = ctx.catalog
        # the opening's rounds raced whole configurations (one screen each, then one proof): what they kept is
        # in the current values; they say nothing about one knob's direction, so they are not history here
        rounds = [r for r in ctx.rounds if not r.opening]
        # ... but a value any round measured and kept is the session's own choice, not a broken start for a
        # floor to repair (the evidence set's shared_buffers 32MB for scans beyond the memory limit, under the
        # playbook's 128MB floor: the floor would undo the kept proof)
        for r in ctx.rounds:
            if r.kept and r.failure is None:
                hist.kept.update(canonical(n, v, cat.get(n)) for n, v in _round_changes(r).items())
        for r in rounds:
            if r.verdict_ok or r.failure is not None:
                # rejected proposals: only the offending values (failed_checks below) are off limits
                for name, value in _round_changes(r).items():
                    hist.forbidden.add(canonical(name, value, cat.get(name)))
            for fc in r.failed_checks:
                self._bound(hist, fc, fc.parameter, fc.value, cat.get(fc.parameter), current)
            if r.failure is not None:
                for nc in r.failure.attempted:
                    self._bound(hist, None, nc.name, nc.value, cat.get(nc.name), current)
        for fc in ctx.validator_feedback:
            self._bound(hist, fc, fc.parameter, fc.value, cat.get(fc.parameter), current)

        stage_rounds = [r for r in rounds if r.stage == ctx.stage]
        applied = [r for r in stage_rounds if r.verdict_ok or r.failure is not None]
        for r in applied:
            for name, value in _round_changes(r).items():
                d = change_direction(name, value, cat.get(name), current)
                if r.kept and r.failure is None:
                    hist.pushes[name] = hist.pushes.get(name, 0) + 1
                    if (r.gain_vs_best or 0.0) < self.min_gain:
                        # kept as a tie (the direction is unknown once applied): leave the knob alone
                        hist.dead.update({(name, "up"), (name, "down"), (name, "set")})
                elif d != "same":
                    hist.dead.add((name, d))
        for b in {r.bottleneck for r in applied}:
            mine = [r for r in applied if r.bottleneck == b]
            streak = 0
            for r in reversed(mine):
                if r.kept and r.failure is None:
                    break
                streak += 1
            if streak >= self.unkept_limit:
                hist.exhausted[b] = f"{streak} rounds in a row did not help"
            elif mine[-1].decision == Decision.redirect:
                hist.exhausted[b] = f"auditor redirected after round {mine[-1].round_no}: {mine[-1].reason}"
        if applied:
            last = applied[-1]
            if (
                last.kept
                and last.failure is None
                and (last.gain_vs_best or 0.0) >= self.min_gain
                and last.bottleneck not in hist.exhausted
            ):
                hist.push_from = last
        self._avoid_experience(ctx.experience, ctx, current, hist)  # for the whole session, not just round 1
        return hist

    def _avoid_experience(
        self, exps: list[Experience], ctx: PlanningContext, current: dict[str, str], hist: History
    ) -> None:
        for exp in exps:
            for kind, items in (("failed", exp.failed), ("ineffective", exp.ineffective)):
                for item in items:
                    changes = item.get("changes") or ({item["name"]: item.get("value")} if "name" in item else {})
                    for name, value in changes.items():
                        spec = ctx.catalog.get(name)
                        key = canonical(name, str(value), spec)
                        note = f"{kind} {name}={value} (session {exp.session_id})"
                        if kind == "ineffective" and key not in hist.forbidden:
                            hist.retrieved_ineffective.setdefault(key, note)
                        hist.forbidden.add(key)
                        d = change_direction(name, str(value), spec, current)
                        if kind == "ineffective" and d != "same":
                            hist.dead.add((name, d))
                        elif kind == "failed":
                            self._bound(hist, None, name, str(value), spec, current)
                        hist.notes.append(note)

    # ------------------------------------------------------------------------------ proposal

    def _evidence(self, hyps: list[Hypothesis], chosen: Bottleneck) -> list[str]:
        lines: list[str] = []
        for h in hyps:
            if h.bottleneck == chosen:
                lines = [f"{h.bottleneck.value} (score {h.score:.2f}): {e}" for e in h.evidence] + lines
            elif h.plausible and h.evidence:
                lines.append(f"{h.bottleneck.value} (score {h.score:.2f}): {h.evidence[0]}")
        return lines

    def _ruled_out(self, hyps: list[Hypothesis], hist: History, chosen: Bottleneck) -> list[str]:
        out = [f"{h.bottleneck.value} (score {h.score:.2f}): {h.ruled_out}" for h in hyps if h.ruled_out]
        out += [f"{b.value}: {why}" for b, why in hist.exhausted.items() if b != chosen]
        return out

    def _proposal(
        self,
        ctx: PlanningContext,
        bottleneck: Bottleneck,
        moves: list[Move],
        hyps: list[Hypothesis],
        hist: History,
        family: str,
        lead: str,
    ) -> Proposal:
        changes = [
            Change(
                name=m.name,
                value=m.value,
                rationale=f"{m.reason} ({m.name}: {m.current} → {m.value}; source: {m.source})",
            )
            for m in moves
        ]
        apply = ApplyMode.strongest([m.spec.apply for m in moves])
        repairs = [
            m.name
            for m in moves
            if (m.trap or m.start == "below default")
            and m.spec.default is not None
            and canonical(m.name, m.value, m.spec) == canonical(m.name, m.spec.default, m.spec)
        ]
        risks = [f"{m.name}: {m.risk}" for m in moves if m.risk]
        if apply == ApplyMode.restart:
            restarts = [m.name for m in moves if m.spec.apply == ApplyMode.restart]
            risks.append(f"restart required for {', '.join(restarts)} (brief unavailability)")
        rationale = (
            f"{lead} Prescribing " + ", ".join(f"{m.name}={m.value}" for m in moves) + f" from the {family} playbook."
        )
        if hist.skipped:  # entries a measurement ruled out (absent_below), so the journal says why not
            rationale += " Skipped: " + "; ".join(hist.skipped) + "."
        log.info(
            "planner.proposed",
            stage=ctx.stage.value,
            bottleneck=bottleneck.value,
            changes={m.name: m.value for m in moves},
            reason=lead,
        )
        return Proposal(
            bottleneck=bottleneck,
            layer=ctx.stage,
            changes=changes,
            intended_effects=[f"{m.name}: {m.effect}" for m in moves],
            risks=risks,
            apply_requirement=apply,
            evidence=self._evidence(hyps, bottleneck),
            ruled_out=self._ruled_out(hyps, hist, bottleneck),
            rationale=rationale,
            planner=self.name,
            repairs=repairs,
        )
