"""Trade moves (issue 14): pay for a bigger data cache with per-session and maintenance memory.

When the validator's memory budget (``rule_id = "memory_budget"``) refuses growing the main data cache
(PostgreSQL shared_buffers, InnoDB buffer pool), the planner proposes the same growth together with
lower per-connection buffers (work_mem, sort/join buffers, tmp_table_size) and maintenance memory, as
one change set; the validator judges the resulting configuration as a whole. The pairs are data:
``catalogs/trades.toml`` (with sources).
"""

from __future__ import annotations

import tomllib
from functools import cache

import structlog
from pydantic import BaseModel, ConfigDict, Field

from agenticdb.dialect import family_of
from agenticdb.models import ApplyMode, Bottleneck, Change, FailedCheck, Proposal
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.playbook import round_base
from agenticdb.resources import data_file
from agenticdb.units import bytes_of, canonical, format_value, parse_value

log = structlog.get_logger(__name__)


class Give(BaseModel):
    """A knob a trade lowers: to ``factor`` × its current value, never below ``floor``.

    A cache that only some workloads use (the MyISAM key cache, the Aria page cache) names the gauge of
    its blocks in use (``used_gauge``, a ``RuntimeState`` gauge), the knob of its block size in bytes
    (``block_knob``) and that knob's server default (``block_bytes``, used when the knob's value is not
    in the configuration read): it gives only when that gauge was read, and never below
    :func:`kept_in_use` × the bytes in use.
    """

    model_config = ConfigDict(extra="forbid")
    knob: str
    factor: float = Field(gt=0, lt=1)
    floor: str
    used_gauge: str | None = None
    block_knob: str | None = None
    block_bytes: int = Field(default=1, ge=1)


class Trade(BaseModel):
    """One trade: grow ``grow``, pay with ``give`` (families as in the playbooks)."""

    model_config = ConfigDict(extra="forbid")
    families: list[str]
    grow: str
    give: list[Give]
    reason: str
    source: str


@cache
def load_trades() -> tuple[Trade, ...]:
    """The trades of ``catalogs/trades.toml``.

    Raises:
        ValueError: the file does not match the schema (pydantic names the field).
    """
    data = tomllib.loads(data_file("catalogs", "trades.toml").read_text())
    return tuple(Trade.model_validate(t) for t in data.get("trade", []))


def refused_growth(ctx: PlanningContext) -> FailedCheck | None:
    """The memory-budget refusal of growing a trade's ``grow`` knob: in this round's validator feedback,
    else in the stage's last round. None when there is none."""
    grows = {t.grow.lower() for t in load_trades()}
    checks = list(ctx.validator_feedback)
    stage_rounds = [r for r in ctx.rounds if r.stage == ctx.stage]
    if not checks and stage_rounds and not stage_rounds[-1].verdict_ok:
        checks = list(stage_rounds[-1].failed_checks)
    for fc in checks:
        if fc.rule_id == "memory_budget" and fc.parameter.lower() in grows:
            return fc
    return None


def trade_proposal(ctx: PlanningContext, family: str, refused: FailedCheck, planner: str) -> Proposal | None:
    """The refused growth paired with lower per-session/maintenance memory; None when no knob can give.

    The gives are taken in the order of ``catalogs/trades.toml``, caches measured unused first. Once the
    caches given so far free the refusal's ``excess_bytes`` (global caches: their size is what the
    estimate counts), no more is given: a per-session buffer such as sort_buffer_size is lowered only
    when the unused caches do not cover the excess (the 512 MiB MariaDB scenario, 2026-12-05: the pool's
    32 MiB excess was paid for with 192 MiB of unused key/Aria caches *and* a halved sort buffer).

    When the refused growth puts the cache back to the server's default from below it (a bad start, as
    the floor rules say) and every give is such a release, the proposal lists the growth in ``repairs``
    and the gives in ``releases``: the auditor treats it as a repair (``auditor.repair_kept``).
    """
    trade = next(
        (t for t in load_trades() if family in t.families and t.grow.lower() == refused.parameter.lower()), None
    )
    if trade is None:
        return None
    current = {**ctx.profile.current_config, **ctx.current_config}
    delta = ctx.last_delta or ctx.profile.baseline_state
    gauges = delta.gauges if delta is not None else {}
    changes = [Change(name=refused.parameter, value=refused.value, rationale=f"trade: grow ({trade.reason})")]
    applies = [ctx.catalog.knobs[refused.parameter].apply] if refused.parameter in ctx.catalog.knobs else []
    releases: list[str] = []
    freed = 0.0
    for g in trade.give:
        if refused.excess_bytes is not None and releases and freed >= refused.excess_bytes:
            break
        spec = ctx.catalog.knobs.get(g.knob)
        if spec is None or spec.layer != ctx.stage or (spec.apply == ApplyMode.restart and not ctx.allow_restart):
            continue
        cur = parse_value(current.get(g.knob, spec.default), spec)
        target = _given(g, cur, gauges, current, ctx)
        if cur is None or target is None:
            continue
        value = format_value(target, spec, family)
        if canonical(g.knob, value, spec) == canonical(g.knob, current.get(g.knob, ""), spec):
            continue
        use = _use_said(g, gauges, current, ctx)
        changes.append(
            Change(
                name=g.knob,
                value=value,
                rationale=f"trade: give ({g.knob}: {current.get(g.knob)} → {value}{'; ' + use if use else ''})",
            )
        )
        applies.append(spec.apply)
        if g.used_gauge is not None:
            releases.append(g.knob)
            freed += bytes_of(family_of(family), spec, cur - target) or 0.0
    if len(changes) < 2:
        return None
    changes = changes[: ctx.max_changes]
    kept = {c.name for c in changes}
    releases = [r for r in releases if r in kept]
    only_releases = len(releases) == len(changes) - 1
    repairs = [refused.parameter] if only_releases and _restores_default(ctx, refused, current) else []
    text = ", ".join(f"{c.name}={c.value}" for c in changes)
    log.info(
        "planner.trade",
        grow=refused.parameter,
        changes=text,
        freed_bytes=freed,
        excess_bytes=refused.excess_bytes,
        repair=bool(repairs),
    )
    return Proposal(
        bottleneck=Bottleneck.buffer_cache,
        layer=ctx.stage,
        changes=changes,
        intended_effects=[f"{refused.parameter}: a bigger cache within the same memory budget"],
        apply_requirement=ApplyMode.strongest(applies),
        evidence=[f"the memory budget refused {refused.parameter}={refused.value}: {refused.message}"],
        rationale=f"trade move: {text} — {trade.reason} (source: {trade.source})."
        + (
            f" A repair: {refused.parameter} goes back to the server's default from below it, paid for only "
            f"with caches measured unused ({', '.join(releases)})."
            if repairs
            else ""
        ),
        planner=planner,
        stage="playbook",
        repairs=repairs,
        releases=releases if repairs else [],
    )


def kept_in_use(ctx: PlanningContext) -> float:
    """How many times its bytes in use a cache given by a trade keeps: twice (judgement: the high-water mark of
    Key_blocks_used / Aria_pagecache_blocks_used with as much again for growth), or 1 + ``ctx.capacity_headroom``
    when the capacity rules ask more (validators/mysql.toml ``mysql.key_buffer_size-in-use``: the blocks in use ×
    (1 + policy.capacity_headroom)). With a headroom of 2 the trade gave the key cache down to 2 × 2.9 MiB in use
    + 1 MiB = 8 MiB, which the rule refused at 8.6 MiB: the opening's limits set, repaired trade after floor,
    was dropped after 4 repairs."""
    return max(2.0, 1.0 + ctx.capacity_headroom)


def kept_said(ctx: PlanningContext) -> str:
    """:func:`kept_in_use` in words: "twice", or "3 ×"."""
    times = kept_in_use(ctx)
    return "twice" if times == 2.0 else f"{times:g} ×"


def _given(
    g: Give, cur: float | None, gauges: dict[str, float], current: dict[str, str], ctx: PlanningContext
) -> float | None:
    """The value (in ``g.knob``'s unit) a trade lowers ``g.knob`` to from ``cur``: ``g.factor`` × ``cur``, never
    below ``g.floor`` nor, for a cache naming its blocks in use, below :func:`kept_in_use` × the bytes in use
    (one MiB more: ``round_base`` rounds down to whole MiB). None when it cannot give: no value, a cache whose use
    was not read, or a target not below ``cur``."""
    spec = ctx.catalog.knobs[g.knob]
    floor = parse_value(g.floor, spec)
    if cur is None or floor is None:
        return None
    lowest = max(cur * g.factor, floor)
    if g.used_gauge is not None:
        in_use = _bytes_in_use(g, gauges, current, ctx)
        if in_use is None:
            return None  # a cache whose use was not read is not given away
        lowest = max(lowest, kept_in_use(ctx) * in_use + 2**20)
    target = round_base(lowest, spec)
    return target if target < cur else None


def unused_cache_bytes(
    ctx: PlanningContext, family: str, grow: str, current: dict[str, str]
) -> tuple[float, list[str]]:
    """What the trade that grows ``grow`` would free from the caches it gives only as far as they are measured
    unused (the gives naming ``used_gauge``: MariaDB's MyISAM key cache and Aria page cache, 128 MiB each by
    default and counted whole by the validator's memory budget), from their values in ``current``: (bytes,
    ["key_buffer_size 128M → 32M", …]). (0, []) when no trade grows ``grow`` or no such cache's use was read.

    The opening's sizers (``opening_host``, ``opening_evidence``) count these bytes as room for the pool: the
    set they write is then over the budget by at most that much, and the set repair (``opening_repair``) makes
    the same trade, so a pool is not held to what unused caches leave (the 512 MiB MariaDB scenario,
    2026-12-07: a miss ratio of 0.227 raised the pool only 64 → 90 MiB, what the budget left beside 256 MiB of
    key/Aria caches). Per-session buffers are not counted: giving them costs the sessions."""
    trade = next((t for t in load_trades() if family in t.families and t.grow.lower() == grow.lower()), None)
    if trade is None:
        return 0.0, []
    delta = ctx.last_delta or ctx.profile.baseline_state
    gauges = delta.gauges if delta is not None else {}
    freed, said = 0.0, []
    for g in trade.give:
        spec = ctx.catalog.knobs.get(g.knob)
        if g.used_gauge is None or spec is None or spec.layer != ctx.stage:
            continue
        if spec.apply == ApplyMode.restart and not ctx.allow_restart:
            continue
        cur = parse_value(current.get(g.knob, spec.default), spec)
        target = _given(g, cur, gauges, current, ctx)
        if cur is None or target is None:
            continue
        freed += bytes_of(family_of(family), spec, cur - target) or 0.0
        said.append(
            f"{g.knob} {current.get(g.knob, spec.default)} → {format_value(target, spec, family)} "
            f"({_use_said(g, gauges, current, ctx)})"
        )
    return freed, said


def pool_room_from_unused(ctx: PlanningContext, family: str, current: dict[str, str]) -> tuple[float, str]:
    """The room (bytes) a pool sizer may count from MariaDB/MySQL caches measured unused
    (:func:`unused_cache_bytes` for innodb_buffer_pool_size) and the clause its source gets
    ("; room from caches given down to twice their blocks in use (…; the set repair's trade,
    catalogs/trades.toml)"), or (0, "") when there is none. The opening's host-sized and evidence sizers ask it
    when the pool they want exceeds what the budget leaves."""
    freed, given = unused_cache_bytes(ctx, family, "innodb_buffer_pool_size", current)
    if not given:
        return freed, ""
    said = ", ".join(given)
    return (
        freed,
        f"; room from caches given down to {kept_said(ctx)} their blocks in use ({said}; the set repair's trade, "
        "catalogs/trades.toml)",
    )


def measured_use(ctx: PlanningContext, family: str, knob: str, current: dict[str, str]) -> str:
    """How much of ``knob``'s cache the statistics found in use, when a trade of ``family`` gives it only as far
    as it is measured unused ("Key_blocks_used 0 blocks × 1024 B = 0.0 MiB in use, kept at twice that or
    more"); "" for any other knob or when the use was not read. ``current``: the values the block size is read
    from."""
    give = next((g for t in load_trades() if family in t.families for g in t.give if g.knob == knob), None)
    if give is None or give.used_gauge is None:
        return ""
    delta = ctx.last_delta or ctx.profile.baseline_state
    return _use_said(give, delta.gauges if delta is not None else {}, current, ctx)


def _use_said(g: Give, gauges: dict[str, float], current: dict[str, str], ctx: PlanningContext) -> str:
    """``g``'s measured use in words ("" when ``g`` names no gauge of its blocks in use or it was not read)."""
    in_use = _bytes_in_use(g, gauges, current, ctx) if g.used_gauge is not None else None
    if in_use is None:
        return ""
    blocks = gauges[g.used_gauge or ""]
    gauge = (g.used_gauge or "").rsplit(".", 1)[-1]
    size = in_use / blocks if blocks else None
    each = f" × {size:g} B" if size else ""
    return f"{gauge} {blocks:g} blocks{each} = {in_use / 2**20:.1f} MiB in use, kept at {kept_said(ctx)} that or more"


def _restores_default(ctx: PlanningContext, refused: FailedCheck, current: dict[str, str]) -> bool:
    """Whether the refused growth sets the knob to the server's shipped default from a value below it."""
    spec = ctx.catalog.knobs.get(refused.parameter)
    if spec is None or spec.default is None or refused.parameter not in current:
        return False
    if canonical(spec.name, str(refused.value), spec) != canonical(spec.name, spec.default, spec):
        return False
    now, default = parse_value(current[refused.parameter], spec), parse_value(spec.default, spec)
    return now is not None and default is not None and now < default


def _bytes_in_use(g: Give, gauges: dict[str, float], current: dict[str, str], ctx: PlanningContext) -> float | None:
    """Bytes of ``g.knob``'s cache in use: the gauge ``g.used_gauge`` (blocks) × the block size in bytes
    (``g.block_knob``'s current value when the catalog knows the knob, its read-only value in
    ``Catalog.facts`` when the catalog leaves it out — aria_block_size is fixed at data-directory creation —
    else ``g.block_bytes``). None when the gauge was not read."""
    blocks = gauges.get(g.used_gauge or "")
    if blocks is None:
        return None
    spec = ctx.catalog.knobs.get(g.block_knob or "")
    size = parse_value(current[spec.name], spec) if spec is not None and spec.name in current else None
    fact = ctx.catalog.facts.get(g.block_knob or "")
    if size is None and isinstance(fact, float | int):
        size = float(fact)
    return blocks * (size or g.block_bytes)
