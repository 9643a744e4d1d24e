"""The heuristic planner's move builders (:class:`MoveBuilders`, a base of
:class:`agenticdb.planner.heuristic.HeuristicPlanner`): from a knob, the history and the playbook to a
:class:`~agenticdb.planner.moves.Move` — usable knobs, bounded numeric steps, entry moves, the moves of a
hypothesis, probes, floors, measured moves and experience seeds. The order in which the planner tries
them is in :mod:`agenticdb.planner.heuristic`."""

from __future__ import annotations

import math
import re

import structlog

from agenticdb.models import ApplyMode, Bottleneck, KnobSpec, StateDelta
from agenticdb.models.planning import PlanningContext
from agenticdb.planner import access
from agenticdb.planner.caps import host_cap
from agenticdb.planner.context import current_delta
from agenticdb.planner.diagnosis import Hypothesis
from agenticdb.planner.moves import History, Move
from agenticdb.planner.playbook import (
    FloorRule,
    HostFacts,
    MeasuredRule,
    Playbook,
    PlaybookEntry,
    measured_absent,
    measured_share,
    round_base,
    size,
)
from agenticdb.planner.wording import floor_reason, start_kind
from agenticdb.units import canonical, format_value, parse_value, unit_bytes

log = structlog.get_logger("agenticdb.planner.heuristic")
"""Logged under the planner's name, as before the move builders had their own module."""


def _workload_class(ctx: PlanningContext) -> str:
    """The workload class the playbook filters use: declared, or "olap" when the last sample shows whole-table
    scans (planner.access; a qloop of full scans scored on TPS reads like an analytic workload)."""
    return access.workload_class(ctx.fingerprint.workload_class, current_delta(ctx))


def _page_cache_serves(ctx: PlanningContext, family: str) -> str | None:
    """:func:`agenticdb.planner.access.page_cache_serves` for ``ctx``: its workload class, the databases' size the
    last sample read (PostgreSQL ``pg_database.size_bytes``, MariaDB ``data.size_bytes``) and the memory limit."""
    hw = ctx.profile.hardware
    data = access.data_bytes(current_delta(ctx))
    return access.page_cache_serves(_workload_class(ctx), data, hw.memory_limit_bytes or hw.memory_bytes, family)


def change_direction(name: str, value: str, spec: KnobSpec | None, current: dict[str, str]) -> str:
    """ "up", "down" or "same" for ``value`` against the current value of ``name``; "set" when either is not numeric."""
    if spec is None:
        return "set"
    new, cur = parse_value(value, spec), parse_value(current.get(name, spec.default), spec)
    if new is None or cur is None:
        return "set"
    return "up" if new > cur else "down" if new < cur else "same"


def _device_iops(delta: StateDelta, device: str | None) -> float:
    """Reads + writes per second of ``device`` (``/dev/`` prefix ignored) in ``delta``; 0 when unknown."""
    if not device or delta.seconds <= 0:
        return 0.0
    p = f"diskstats.{device.removeprefix('/dev/')}."
    return (delta.totals.get(p + "reads", 0.0) + delta.totals.get(p + "writes", 0.0)) / delta.seconds


class MoveBuilders:
    """The move builders of the heuristic planner (stateless: everything comes in as arguments)."""

    def _usable(self, ctx: PlanningContext, name: str, hist: History) -> KnobSpec | None:
        spec = ctx.catalog.get(name)
        if spec is None or spec.layer != ctx.stage or name in hist.banned:
            return None
        if spec.apply == ApplyMode.restart and not ctx.allow_restart:
            return None
        return spec

    def _resolve(self, ctx: PlanningContext, knob: str) -> list[str]:
        """Concrete knob names for a playbook name (``<dev>`` → the data device, else every device)."""
        if "<dev>" not in knob:
            return [knob]
        dev = (ctx.profile.hardware.data_device or "").removeprefix("/dev/")
        if dev and knob.replace("<dev>", dev) in ctx.catalog.knobs:
            return [knob.replace("<dev>", dev)]
        pat = re.compile("^" + re.escape(knob).replace(re.escape("<dev>"), r"[^.]+") + "$")
        return sorted(n for n in ctx.catalog.knobs if pat.match(n))[:1]

    @staticmethod
    def _capped(ctx: PlanningContext, name: str, spec: KnobSpec, target: float) -> float:
        """``target`` rounded (``round_base``) and never above the validator's host ceiling for ``name``
        (``planner.caps.host_cap``: cores, memory limit), rounded down when the ceiling is what limits it: a
        move the validator refuses costs a round (vm.min_free_kbytes sized from RAM under a 256 MiB cgroup;
        an experience seed of max_parallel_workers_per_gather learned on a bigger host)."""
        cap = host_cap(ctx, name)
        if cap is None or target <= cap:
            return round_base(target, spec)
        capped = round_base(cap, spec)
        # round_base rounds integers below 1 MiB to the nearest (819.6 → 820, refused): round down instead
        return round_base(math.floor(cap), spec) if capped > cap else capped

    def _step_bound(self, ctx: PlanningContext, target: float, cur: float | None) -> float:
        if cur is None or cur <= 0:
            return target
        f = ctx.max_step_factor
        return min(max(target, cur / f), cur * f)

    def _numeric(
        self,
        ctx: PlanningContext,
        e: PlaybookEntry,
        spec: KnobSpec,
        name: str,
        cur: float | None,
        facts: HostFacts,
        hist: History,
    ) -> float | None:
        assert e.first is not None
        first = size(e.first, facts, spec, cur)
        if first is None:
            return None
        limit = size(e.limit, facts, spec, cur) if e.limit else None
        k = hist.pushes.get(name, 0)
        step = e.steps[min(k, len(e.steps) - 1)]
        up = e.direction == "up"
        if cur is None:
            target = first
        elif up:
            target = first if cur < first / 1.2 else cur * step
            target = min(target, limit if limit is not None else math.inf)
            bound = hist.bound_up.get(name)
            if bound is not None and target >= bound:
                target = math.sqrt(cur * bound) if cur > 0 else bound / 2
        else:
            target = first if cur > first * 1.2 else cur / step
            target = max(target, limit if limit is not None else -math.inf)
            bound = hist.bound_down.get(name)
            if bound is not None and target <= bound:
                target = math.sqrt(cur * bound) if cur > 0 and bound > 0 else (cur + bound) / 2
        target = self._capped(ctx, name, spec, self._step_bound(ctx, target, cur))
        if cur is not None and ((up and target <= cur) or (not up and target >= cur)):
            return None
        return target

    def _entry_move(
        self,
        ctx: PlanningContext,
        e: PlaybookEntry,
        name: str,
        spec: KnobSpec,
        current: dict[str, str],
        facts: HostFacts,
        family: str,
        hist: History,
    ) -> Move | None:
        raw = current.get(name, spec.default)
        if (name, e.direction) in hist.dead:
            return None
        if e.direction == "set":
            cur_text = str(raw).strip().lower() if raw is not None else ""
            if cur_text in {u.lower() for u in e.unless_current_in}:
                return None
            offered = {v.lower(): v for v in (spec.enum_values or [])}
            cands = (
                [e.value]
                if e.value is not None
                else [offered[p.lower()] for p in e.prefer if not offered or p.lower() in offered]
            )
            if e.value is None and not offered:
                cands = []  # never guess an enum name the catalog does not list
            value: str | int | float | None = next(
                (
                    c
                    for c in cands
                    if c is not None
                    and canonical(name, c, spec) not in hist.forbidden
                    and canonical(name, c, spec) != canonical(name, str(raw), spec)
                ),
                None,
            )
        else:
            cur = parse_value(raw, spec) if raw is not None else None
            target = self._numeric(ctx, e, spec, name, cur, facts, hist)
            value = None if target is None else format_value(target, spec, family)
            if value is not None and canonical(name, value, spec) in hist.forbidden:
                value = None
        if value is None:
            return None
        return Move(name, value, spec, e.bottleneck, raw, e.effect, e.risk, e.reason, e.source)

    def _moves_for(
        self,
        ctx: PlanningContext,
        book: Playbook,
        b: Bottleneck,
        h: Hypothesis | None,
        current: dict[str, str],
        facts: HostFacts,
        family: str,
        hist: History,
        only: set[str] | None = None,
    ) -> list[Move]:
        moves: list[Move] = []
        left = _page_cache_serves(ctx, family) if b == Bottleneck.buffer_cache else None
        for e in book.entries_for(b):
            if e.workload_classes and _workload_class(ctx) not in e.workload_classes:
                continue
            why = f"not {e.knob} up: {left}" if left is not None and e.direction == "up" else None
            if why is None and h is not None and h.score < e.min_score:
                continue
            why = why or measured_absent(e, current_delta(ctx))  # absent_below, needs
            if why is not None:
                log.info("planner.entry_skipped", knob=e.knob, reason=why)
                if why not in hist.skipped:
                    hist.skipped.append(why)
                continue
            for name in self._resolve(ctx, e.knob):
                if only is not None and name not in only:
                    continue
                if any(m.name == name for m in moves):
                    continue
                spec = self._usable(ctx, name, hist)
                if spec is None:
                    continue
                mv = self._entry_move(ctx, e, name, spec, current, facts, family, hist)
                if mv is not None:
                    moves.append(mv)
            if len(moves) >= ctx.max_changes:
                break
        return moves[: ctx.max_changes]

    def _probes(
        self,
        ctx: PlanningContext,
        book: Playbook,
        delta: StateDelta,
        current: dict[str, str],
        facts: HostFacts,
        family: str,
        hist: History,
    ) -> list[Move]:
        """First low-risk moves of the playbook's ``[[probe]]`` list, offered only while the data device
        served at least ``min_device_iops`` in the last measured run (diskstats reads + writes)."""
        moves: list[Move] = []
        for e in book.probe:
            if e.bottleneck in hist.exhausted or (
                e.workload_classes and _workload_class(ctx) not in e.workload_classes
            ):
                continue
            for name in self._resolve(ctx, e.knob):
                dev = name.split(".")[1] if name.startswith("block.") else None
                iops = _device_iops(delta, dev or ctx.profile.hardware.data_device)
                spec = self._usable(ctx, name, hist)
                if spec is None or iops < e.min_device_iops or any(m.name == name for m in moves):
                    log.debug("planner.probe_skipped", knob=name, iops=round(iops, 1), need=e.min_device_iops)
                    continue
                mv = self._entry_move(ctx, e, name, spec, current, facts, family, hist)
                if mv is not None:
                    mv.effect = f"{mv.effect} (probe: the device served {iops:,.0f} IOPS)"
                    moves.append(mv)
        return moves[: ctx.max_changes]

    def _floors(
        self,
        ctx: PlanningContext,
        book: Playbook,
        current: dict[str, str],
        facts: HostFacts,
        family: str,
        hist: History,
    ) -> list[Move]:
        moves: list[Move] = []
        for general in book.floor:
            for name in self._resolve(ctx, general.knob):  # "<dev>" → the data device
                rule = general if name == general.knob else general.model_copy(update={"knob": name})
                spec = self._usable(ctx, name, hist)
                if spec is None:
                    continue
                mv = self._floor_move(ctx, rule, spec, current, facts, family, hist)
                if mv is not None:
                    moves.append(mv)
        return moves

    def _measured(
        self, ctx: PlanningContext, book: Playbook, delta: StateDelta, current: dict[str, str], hist: History
    ) -> list[Move]:
        """Moves of the ``[[measured]]`` rules whose measured cost share reached their threshold."""
        moves: list[Move] = []
        for rule in book.measured:
            spec = self._usable(ctx, rule.knob, hist)
            if spec is None:
                continue
            mv = self._measured_move(rule, spec, delta, current, hist)
            if mv is not None:
                moves.append(mv)
        return moves

    @staticmethod
    def _measured_move(
        rule: MeasuredRule, spec: KnobSpec, delta: StateDelta, current: dict[str, str], hist: History
    ) -> Move | None:
        share = measured_share(delta, rule.part, rule.whole, rule.min_whole_per_s)
        if share is None or share < rule.above:
            return None
        part, whole = delta.totals[rule.part], delta.totals[rule.whole]
        raw = current.get(rule.knob, spec.default)
        key = canonical(rule.knob, rule.value, spec)
        if raw is not None and canonical(rule.knob, str(raw), spec) == key:
            return None
        if key in hist.forbidden:
            return None
        seen = f"{rule.what} took {share:.0%} of {rule.whole} over the last sample ({part:.0f} of {whole:.0f})"
        reason = f"{seen}, with {rule.knob} = {raw}; this rule acts from {rule.above:.0%}. {rule.reason}"
        return Move(
            rule.knob,
            rule.value,
            spec,
            rule.bottleneck,
            raw,
            rule.effect,
            "",
            reason,
            rule.source,
            trap=True,
            start="measured",
            measured=seen,
        )

    def _floor_move(
        self,
        ctx: PlanningContext,
        rule: FloorRule,
        spec: KnobSpec,
        current: dict[str, str],
        facts: HostFacts,
        family: str,
        hist: History,
    ) -> Move | None:
        raw = current.get(rule.knob, spec.default)
        value: str | int | float
        floor: float | None = None
        if raw is not None and any(
            canonical(rule.knob, raw, spec) == canonical(rule.knob, v, spec) for v in rule.unless_in
        ):
            return None  # a value with a meaning of its own (0 = no limit), not a small one
        # A trap goes back to ``value``; ``value = "default"`` is the server's own shipped default (MariaDB
        # 10.11 ships optimizer_prune_level 2, MySQL 8 ships 1: one rule serves both).
        back = spec.default if rule.value == "default" else rule.value
        if rule.revert_if is not None:  # a switch (bool/enum) compared as the server spells it
            if raw is None or back is None:
                return None
            if canonical(rule.knob, raw, spec) != canonical(rule.knob, rule.revert_if, spec):
                return None
            if canonical(rule.knob, back, spec) == canonical(rule.knob, raw, spec):
                return None  # the trap value is this server's default: nothing to put back
            value = back
            return self._floor_result(rule, spec, raw, value, floor, facts, family, hist)
        cur = parse_value(raw, spec) if raw is not None else None
        if cur is None:
            return None
        if rule.revert_above is not None:
            if cur <= rule.revert_above or back is None:
                return None
            value = back  # back to the default: a return to default is not a step outward
        else:
            assert rule.floor is not None
            floor = size(rule.floor, facts, spec, cur)
            if floor is None or cur >= floor or (rule.knob, "up") in hist.dead:
                return None
            if raw is not None and canonical(rule.knob, raw, spec) in hist.kept:
                log.info("planner.floor_skipped", knob=rule.knob, value=raw, reason="measured and kept this session")
                return None
            shipped = parse_value(spec.default, spec) if spec.default is not None else None
            if shipped is not None and cur >= shipped:
                return None  # at or above the server's shipped default is not a broken start
            # Below the floor is a broken start (and cur is below the shipped default, checked above).
            # The repair goes back at least to the shipped default in one move — a return to the
            # default is not a step into the unknown, and the validator does not bound it
            # (validation/steps.is_default) — and towards a floor above the default in steps of at
            # most max_step_factor. innodb_buffer_pool_size 8M under a 384M floor moves to the 128M
            # default, not to 32M (scenario mdb-buffer-pool-tiny, issue 22).
            target = self._step_bound(ctx, floor, cur)
            if shipped is not None:
                target = max(target, shipped)
            target = round_base(target, spec)
            if target <= cur:
                return None
            value = format_value(target, spec, family)
        return self._floor_result(rule, spec, raw, value, floor, facts, family, hist)

    def _floor_result(
        self,
        rule: FloorRule,
        spec: KnobSpec,
        raw: str | None,
        value: str | int | float,
        floor: float | None,
        facts: HostFacts,
        family: str,
        hist: History,
    ) -> Move | None:
        """The floor rule's move to ``value``, unless this session or experience already ruled it out."""
        key = canonical(rule.knob, value, spec)
        # A known trap's fix is retried although another session called it ineffective: one noisy tie
        # (or a bundle it was part of) must not leave commit_delay=1000 in place for good. Failures and
        # this session's own tries still rule it out.
        retry = rule.is_trap and key in hist.retrieved_ineffective
        if key in hist.forbidden and not retry:
            return None
        if retry:
            note = hist.retrieved_ineffective[key]
            hist.notes = [n for n in hist.notes if n != note]
            hist.retried.append(note)
        return Move(
            rule.knob,
            value,
            spec,
            rule.bottleneck,
            raw,
            rule.effect,
            "",
            floor_reason(rule, spec, raw, floor, facts, family),
            rule.source,
            trap=rule.is_trap,
            start=start_kind(rule, spec, raw),
        )

    def _seeds(
        self,
        ctx: PlanningContext,
        current: dict[str, str],
        family: str,
        hist: History,
        by_b: dict[Bottleneck, Hypothesis],
        taken: set[str],
    ) -> list[Move]:
        """Beneficial directions of retrieved experience, scaled to this host's memory."""
        items = [(exp, it) for exp in ctx.experience for it in exp.beneficial]
        items.sort(key=lambda p: -float(p[1].get("gain", 0.0) or 0.0))
        mem = ctx.profile.hardware.memory_limit_bytes or ctx.profile.hardware.memory_bytes
        moves: list[Move] = []
        for exp, it in items:
            try:
                b = Bottleneck(it.get("bottleneck", "unknown"))
            except ValueError:
                b = Bottleneck.unknown
            if b == Bottleneck.unknown:
                b = next(iter(by_b)) if by_b else Bottleneck.unknown
            for name, val in (it.get("changes") or {}).items():
                spec = self._usable(ctx, name, hist)
                if spec is None or name in taken or any(m.name == name for m in moves):
                    continue
                raw = current.get(name, spec.default)
                cur = parse_value(raw, spec) if raw is not None else None
                target, why = _seed_size(exp.best_config_relative.get(name, {}), val, spec, mem)
                value: str | int | float = str(val)
                if target is not None:
                    bounded = self._step_bound(ctx, target, cur)
                    capped = self._capped(ctx, name, spec, bounded)
                    cap = host_cap(ctx, name)
                    if bounded != target:
                        why = f"{why}; bounded to ×{ctx.max_step_factor:g} of the value in effect per step"
                    if cap is not None and bounded > cap:
                        why = f"{why}; capped by this host's ceiling for {name}"
                    value = format_value(capped, spec, family)
                d = change_direction(name, str(value), spec, current)
                if d == "same" or (name, d) in hist.dead or canonical(name, value, spec) in hist.forbidden:
                    continue
                gain = float(it.get("gain", 0.0) or 0.0)
                moves.append(
                    Move(
                        name,
                        value,
                        spec,
                        b,
                        raw,
                        f"repeat a direction that gained {gain:+.1%}",
                        "",
                        f"helped in session {exp.session_id} on a similar fingerprint ({name}={val}, gain {gain:+.1%})"
                        + _differs(name, value, val, spec, why),
                        f"experience memory, session {exp.session_id}",
                    )
                )
        return moves


FRACTION_DIGITS = 6
"""Decimal places of a stored ``fraction_of_memory`` (``store.memory.experience.relative_values``)."""


def _seed_size(
    rel: dict[str, float | str], val: str | int | float | None, spec: KnobSpec, mem: int
) -> tuple[float | None, str]:
    """The size (knob base unit) an experience's ``val`` transfers to on a host of ``mem`` bytes, and why it
    is not ``val`` itself ("" when it is).

    The stored fraction of memory scales only the value it was taken from (``rel["value"]``: the best
    configuration's, which may not be this beneficial change's); and on a host whose memory gives back the
    cited value within the fraction's rounding (``FRACTION_DIGITS``: 16MB of 8 GiB is 0.001953, 15.99 MiB
    again, which whole-MiB rounding made 15MB) the cited value is the one learned, so it is kept as is.
    """
    literal = parse_value(val, spec) if val is not None else None
    frac, ub = rel.get("fraction_of_memory"), unit_bytes(spec.unit)
    learned = rel.get("value")
    same = learned is None or canonical(spec.name, str(learned), spec) == canonical(spec.name, str(val), spec)
    if not (isinstance(frac, int | float) and ub and mem and same):
        return literal, ""
    scaled = frac * mem / ub
    if literal is not None and abs(scaled - literal) * ub <= 10.0**-FRACTION_DIGITS * mem:
        return literal, ""
    return scaled, f"scaled to this host's memory ({frac:g} of {mem / 2**30:.1f} GiB)"


def _differs(name: str, value: object, val: object, spec: KnobSpec, why: str) -> str:
    """`` — proposed <value>: <why>`` when the move's value is not the experience's ``val`` (never cite
    evidence for a value that is not the one proposed); "" when it is."""
    if canonical(name, str(value), spec) == canonical(name, str(val), spec):
        return ""
    return f"; proposed {value}, not {val}: {why.lstrip('; ') or 'rounded to the knob (whole MiB, block size, limits)'}"
