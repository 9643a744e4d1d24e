"""The memory budget from what the server really uses (issue 14), with the worst case as a warning.

The worst-case estimate of :func:`agenticdb.validation.host.memory_estimate` (every connection of
``max_connections`` sorting at once) refuses every memory increase on a small host: under a 512 MiB
cgroup, 100 connections × 4 MB work_mem alone is 400 MB. When the runtime state shows what the server
uses, the budget is judged on a measured estimate instead (terms named in the rule file's
``[memory_budget]``):

* shared memory: the server's own figure (PostgreSQL ``shared_memory_size``, manual 20.15) measured for
  the current configuration, moved by the change of the global terms (shared_buffers, wal_buffers) and of
  the memory sized per process slot (``[memory_budget.shared_slots]``: lock tables and PGPROC, bytes per
  slot × (connections + workers + WAL senders + prepared transactions)) and per entry of a knob
  (``[[memory_budget.shared_tables]]``: pg_stat_statements.max × bytes per entry);
  without such a gauge (MariaDB), the global terms themselves (buffer pool, log buffer, key buffer…);
* per-connection memory: the observed peak of connected backends/threads (pg_stat_activity,
  ``Threads_connected``) × the per-connection terms × ``hash_mem_multiplier`` where the DBMS has one ×
  ``policy.per_connection_work_mem_factor``; a per-connection term the change raises (or every term,
  when it raises the connection limit) counts every allowed connection, as in the worst case;
* maintenance memory: ``maintenance_work_mem`` (or ``autovacuum_work_mem``) × autovacuum workers;
* per-session buffers allocated on demand (``[[memory_budget.per_session]]``: temp_buffers,
  logical_decoding_work_mem, MariaDB's in-memory temporary tables and bulk insert buffer): a term counts
  only when the change raises it (its value or its session count), for the observed peak of sessions with
  ``policy.capacity_headroom`` (at most its session knob), and for every allowed session in the worst case.

The limit is ``policy.memory_fraction`` × the memory limit (the cgroup limit when there is one, else RAM:
``Hardware.memory_limit_bytes``). A change set that does not raise the estimate is never refused (lowering
work_mem on a host already over budget must pass). The worst case stays a warning with its numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agenticdb.config.sections import PolicyConfig
from agenticdb.models import FailedCheck, Hardware, Observed
from agenticdb.validation.resulting import ResultingConfig
from agenticdb.validation.rules import MemoryBudget, RuleSet, SessionTerm

GiB = 1024**3
MiB = 1024**2

# PostgreSQL sizes wal_buffers itself when set to -1 (manual 20.5.1): 1/32 of shared_buffers, at least
# 64kB, at most one WAL segment (16MB by default).
_AUTO_SIZED = {
    "wal_buffers": lambda cfg: min(max((cfg.number("shared_buffers") or 0) / 32, 64 * 1024), 16 * MiB),
}


@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated server memory in bytes, its terms (bytes by label) and how it was obtained."""

    total: float
    parts: dict[str, float]
    basis: str

    def terms(self) -> str:
        """The terms, largest first ("shared memory = 0.14 GiB, work_mem × 8 backends × hash_mem_multiplier
        2 = 64 MiB"): each label names every factor, the size follows " = "."""
        ordered = sorted(self.parts.items(), key=lambda kv: -kv[1])
        return ", ".join(f"{k} = {_size(v)}" for k, v in ordered if v > 0)


def _size(n: float) -> str:
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / MiB:.0f} MiB"


def _global(cfg: ResultingConfig, name: str) -> float:
    n = cfg.number(name)
    if n is None:
        return 0.0
    if n <= 0 and name in _AUTO_SIZED:
        n = _AUTO_SIZED[name](cfg)
    return max(n, 0.0)


def slot_memory(cfg: ResultingConfig, budget: MemoryBudget) -> float:
    """Bytes of shared memory sized per process slot (``[memory_budget.shared_slots]``; 0 without one)."""
    s = budget.shared_slots
    if s is None:
        return 0.0
    slots = sum(max(cfg.number(n) or 0.0, 0.0) for n in s.slots) + s.plus
    each = s.each_bytes + sum(max(cfg.number(t.count) or 0.0, 0.0) * t.bytes for t in s.per_slot)
    return slots * each


SLOTS_LABEL = "lock tables and process slots (raised)"


def table_memory(cfg: ResultingConfig, budget: MemoryBudget) -> dict[str, float]:
    """Bytes of shared memory sized per entry, by label ("pg_stat_statements.max × 384 bytes")."""
    return {
        f"{t.count} × {t.bytes:g} bytes": max(cfg.number(t.count) or 0.0, 0.0) * t.bytes for t in budget.shared_tables
    }


def _tables_raised(cfg: ResultingConfig, before: ResultingConfig | None, budget: MemoryBudget) -> dict[str, float]:
    """The growth of each :func:`table_memory` term by the change, labelled "(raised)"."""
    if before is None:
        return {}
    was = table_memory(before, budget)
    return {f"{k} (raised)": v - was.get(k, 0.0) for k, v in table_memory(cfg, budget).items() if v > was.get(k, 0.0)}


def _session_each(cfg: ResultingConfig, term: SessionTerm) -> float:
    each = max(cfg.number(term.each) or 0.0, 0.0)
    if term.capped_by is not None:
        cap = cfg.number(term.capped_by)
        if cap is not None and cap >= 0:
            each = min(each, cap)
    return each


def session_memory(
    cfg: ResultingConfig, before: ResultingConfig | None, budget: MemoryBudget, sessions: float | None = None
) -> dict[str, float]:
    """The per-session terms the change raises (bytes by label): a session count × the buffer each may hold,
    counted when the buffer or its session knob is larger than in ``before`` (none without ``before``).

    The count is ``sessions`` (the observed peak with the policy's capacity headroom, in the measured
    estimate) capped by the term's session knob, or every allowed session when ``sessions`` is None (the
    worst case)."""
    parts: dict[str, float] = {}
    if before is None:
        return parts
    for term in budget.per_session:
        count_knob = term.sessions or budget.connections
        if count_knob is None:
            continue
        each, allowed = _session_each(cfg, term), max(cfg.number(count_knob) or 0.0, 0.0)
        if each <= _session_each(before, term) and allowed <= (before.number(count_knob) or 0.0):
            continue
        count = allowed if sessions is None else min(sessions, allowed)
        who = f"{count:g} {count_knob}" if sessions is None or count == allowed else f"{count:g} sessions"
        cap = f" (capped by {term.capped_by})" if term.capped_by else ""
        parts[f"{term.each}{cap} × {who} (raised)"] = count * each
    return parts


def _workers(cfg: ResultingConfig, budget: MemoryBudget) -> dict[str, float]:
    parts: dict[str, float] = {}
    for w in budget.workers:
        count = cfg.number(w["count"]) or 0.0
        each = cfg.number(w["each"]) or 0.0
        override = cfg.number(w["override"]) if "override" in w else None
        if override is not None and override > 0:
            each = override
        label = f"{w['each']} × {count:g} {w['count']}"
        parts[label] = parts.get(label, 0.0) + count * each
    return parts


def per_connection_factor(cfg: ResultingConfig, budget: MemoryBudget, policy: PolicyConfig) -> tuple[float, str]:
    """(factor, label) of every per-connection term: ``hash_mem_multiplier`` where the DBMS has one
    (PostgreSQL manual 20.4.1: a hash operation may use work_mem × hash_mem_multiplier) times
    ``policy.per_connection_work_mem_factor``; the label names each factor that is not 1
    (" × hash_mem_multiplier 2")."""
    mult = cfg.number(budget.per_connection_multiplier) if budget.per_connection_multiplier else None
    mult = mult if mult and mult > 0 else 1.0
    label = f" × {budget.per_connection_multiplier} {mult:g}" if mult != 1 else ""
    if policy.per_connection_work_mem_factor != 1:
        label += f" × per_connection_work_mem_factor {policy.per_connection_work_mem_factor:g}"
    return mult * policy.per_connection_work_mem_factor, label


def peak_connections(budget: MemoryBudget, observed: Observed | None) -> float | None:
    """The observed peak of backends/threads holding per-connection memory; None when not measured."""
    gauges = observed.gauges if observed is not None else {}
    seen = [gauges[g] for g in budget.observed_connections if g in gauges]
    return max(seen) if seen else None


def measured_estimate(
    cfg: ResultingConfig,
    before: ResultingConfig,
    budget: MemoryBudget,
    policy: PolicyConfig,
    observed: Observed | None,
) -> MemoryEstimate | None:
    """The estimate of ``cfg`` from the observed gauges (see the module docstring); ``before`` is the
    configuration the gauges were measured with. None when the peak connections were not observed."""
    peak = peak_connections(budget, observed)
    if peak is None:
        return None
    gauges = observed.gauges if observed is not None else {}
    parts: dict[str, float] = {}
    shm = gauges.get(budget.shared_memory_gauge) if budget.shared_memory_gauge else None
    if shm is not None and shm > 0:
        moved = sum(_global(cfg, n) - _global(before, n) for n in budget.global_)
        moved += slot_memory(cfg, budget) - slot_memory(before, budget)
        moved += sum(table_memory(cfg, budget).values()) - sum(table_memory(before, budget).values())
        parts["shared memory (measured)"] = max(shm + moved, 0.0)
        # the entry tables raised, named as terms of their own so that the message names the knob
        for label, grown in _tables_raised(cfg, before, budget).items():
            parts["shared memory (measured)"] -= min(grown, parts["shared memory (measured)"])
            parts[label] = grown
        basis = f"shared memory measured ({_size(shm)} now, {moved / MiB:+.0f} MiB by the change)"
    else:
        parts.update({n: _global(cfg, n) for n in budget.global_})
        parts.update(_slots_raised(cfg, before, budget))
        parts.update(_tables_raised(cfg, before, budget))
        basis = "global buffers as configured"
    factor, factor_label = per_connection_factor(cfg, budget, policy)
    backends = max(peak, 1.0)
    conns = cfg.number(budget.connections) if budget.connections else None
    more_conns = conns is not None and conns > (before.number(budget.connections or "") or 0.0)
    # a raised multiplier (hash_mem_multiplier) raises every per-connection term, like a raised work_mem
    more_each = factor > per_connection_factor(before, budget, policy)[0]
    for name in budget.per_connection:
        n = cfg.number(name)
        if n is None or n <= 0:
            continue
        # A per-connection buffer (or the connection count, or their multiplier) being raised is judged on
        # every allowed connection: the observed peak says nothing about a burst that the new value would
        # make costly.
        raised = conns is not None and (more_conns or more_each or n > (before.number(name) or 0.0))
        count = conns if raised and conns is not None else backends
        who = f"{count:g} {budget.connections} (raised)" if raised else f"{backends:g} backends"
        parts[f"{name} × {who}{factor_label}"] = count * n * factor
    # on-demand buffers (temporary tables, decoding, bulk insert) raised: the sessions the opening budgets too
    sessions = math.ceil(backends * (1 + policy.capacity_headroom))
    parts.update(session_memory(cfg, before, budget, sessions))
    parts.update(_workers(cfg, budget))
    basis += f"; peak {backends:g} connected backends observed ({', '.join(budget.observed_connections)})"
    return MemoryEstimate(sum(parts.values()), parts, basis)


def _slots_raised(cfg: ResultingConfig, before: ResultingConfig | None, budget: MemoryBudget) -> dict[str, float]:
    """The growth of :func:`slot_memory` by the change (the global terms do not hold the lock tables)."""
    grown = slot_memory(cfg, budget) - slot_memory(before, budget) if before is not None else 0.0
    return {SLOTS_LABEL: grown} if grown > 0 else {}


def worst_case(
    cfg: ResultingConfig, budget: MemoryBudget, policy: PolicyConfig, before: ResultingConfig | None = None
) -> MemoryEstimate:
    """Every connection of ``connections`` (max_connections) holding every per-connection buffer times
    :func:`per_connection_factor` (hash_mem_multiplier included), plus the growth of the per-slot and
    per-entry shared memory and the per-session terms raised from ``before``."""
    parts = {n: _global(cfg, n) for n in budget.global_}
    parts.update(_slots_raised(cfg, before, budget))
    parts.update(_tables_raised(cfg, before, budget))
    parts.update(session_memory(cfg, before, budget))
    conns = cfg.number(budget.connections) if budget.connections else None
    factor, factor_label = per_connection_factor(cfg, budget, policy)
    if conns:
        for name in budget.per_connection:
            n = cfg.number(name)
            if n is not None and n > 0:
                parts[f"{name} × {conns:g} {budget.connections}{factor_label}"] = conns * n * factor
    parts.update(_workers(cfg, budget))
    return MemoryEstimate(sum(parts.values()), parts, f"worst case: every one of {budget.connections} connections")


def check_memory(
    cfg: ResultingConfig,
    before: ResultingConfig,
    rules: RuleSet,
    hw: Hardware,
    policy: PolicyConfig,
    observed: Observed | None = None,
) -> tuple[list[FailedCheck], list[str]]:
    """The ``hardware`` memory-budget check of a change set and its warnings.

    Evaluated only when a changed parameter takes part in the budget. Refused when the estimate
    (measured when the gauges are there, else the worst case) exceeds ``policy.memory_fraction`` × the
    memory limit and the change raises it.
    """
    budget = rules.memory_budget
    if budget is None:
        return [], []
    changed = [p for p in budget.judged() if cfg.is_changed(p)]
    if not changed:
        return [], []
    allowed = policy.memory_fraction * hw.memory_limit_bytes
    worst = worst_case(cfg, budget, policy, before)
    est = measured_estimate(cfg, before, budget, policy, observed)
    was = measured_estimate(before, before, budget, policy, observed) if est is not None else None
    warnings: list[str] = []
    if est is None:
        est, was = worst, worst_case(before, budget, policy)
    elif worst.total > allowed:
        warnings.append(
            f"memory: the worst case {_size(worst.total)} ({worst.terms()}) exceeds memory_fraction "
            f"{policy.memory_fraction:g} × {_limit_text(hw)} = {_size(allowed)}; judged on the measured "
            f"estimate {_size(est.total)} ({est.terms()})"
        )
    if est.total <= allowed or (was is not None and est.total <= was.total):
        return [], warnings
    culprit = max(changed, key=lambda p: max((v for k, v in est.parts.items() if k.startswith(p)), default=0.0))
    ch = cfg.changed[cfg.key(culprit)]
    return [
        FailedCheck(
            check="hardware",
            parameter=ch.name,
            value=ch.value,
            rule_id="memory_budget",
            excess_bytes=est.total - allowed,
            source="; ".join(
                [budget.source, *([budget.measured_source] if budget.measured_source else [])]
                + budget.term_sources(culprit)
            ),
            message=f"{ch.name}={ch.value} (rule memory_budget): estimated server memory {_size(est.total)} "
            f"({est.terms()}; {est.basis}) exceeds memory_fraction {policy.memory_fraction:g} × "
            f"{_limit_text(hw)} = {_size(allowed)}, and the change raises it from "
            f"{_size(was.total if was else 0.0)} — {budget.reason}",
        )
    ], warnings


def _limit_text(hw: Hardware) -> str:
    cg = _size(hw.cgroup_memory_limit_bytes) if hw.cgroup_memory_limit_bytes else "none"
    return f"memory limit {_size(hw.memory_limit_bytes)} (RAM {_size(hw.memory_bytes)}, cgroup limit {cg})"
