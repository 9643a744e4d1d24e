"""Hardware checks against the real host: memory budget, WAL/redo size vs free disk, worker counts vs
cores, and the Linux strict-overcommit headroom. Terms and thresholds come from the rule file
(``[memory_budget]``, ``[disk_budget]``, ``[[cpu_limit]]``) and from ``PolicyConfig``.
"""

from __future__ import annotations

from agenticdb.config.sections import PolicyConfig
from agenticdb.models import FailedCheck, Hardware, Observed
from agenticdb.validation.memory import check_memory
from agenticdb.validation.resulting import ResultingConfig
from agenticdb.validation.rules import RuleSet

GiB = 1024**3

# PostgreSQL sizes some memory knobs itself when set to -1 (manual 20.4.1 / 20.5.1): wal_buffers = 1/32 of
# shared_buffers, at least 64kB, at most one WAL segment (16MB by default).
_AUTO_SIZED = {
    "wal_buffers": lambda cfg: min(max((cfg.number("shared_buffers") or 0) / 32, 64 * 1024), 16 * 1024**2),
}


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def _limit_text(hw: Hardware) -> str:
    cg = _gib(hw.cgroup_memory_limit_bytes) if hw.cgroup_memory_limit_bytes else "none"
    return f"RAM {_gib(hw.memory_bytes)}, cgroup limit {cg}"


def memory_estimate(cfg: ResultingConfig, rules: RuleSet, policy: PolicyConfig) -> tuple[float, dict[str, float]]:
    """Estimated server memory in bytes and the contribution of each term (by knob name)."""
    budget = rules.memory_budget
    parts: dict[str, float] = {}
    if budget is None:
        return 0.0, parts
    for name in budget.global_:
        n = cfg.number(name)
        if n is None:
            continue
        if n <= 0 and name in _AUTO_SIZED:
            n = _AUTO_SIZED[name](cfg)
        parts[name] = max(n, 0.0)
    conns = cfg.number(budget.connections) if budget.connections else None
    if conns:
        for name in budget.per_connection:
            n = cfg.number(name)
            if n is not None and n > 0:
                parts[name] = conns * n * policy.per_connection_work_mem_factor
    for w in budget.workers:
        count = cfg.number(w["count"]) or 0.0
        each = cfg.number(w["each"]) or 0.0
        override = cfg.number(w["override"]) if "override" in w else None
        if override is not None and override > 0:
            each = override
        parts[w["each"]] = parts.get(w["each"], 0.0) + count * each
    return sum(parts.values()), parts


def check_host(
    cfg: ResultingConfig,
    before: ResultingConfig,
    rules: RuleSet,
    hw: Hardware,
    policy: PolicyConfig,
    flavor: str,
    version: str,
    observed: Observed | None = None,
) -> tuple[list[FailedCheck], list[str]]:
    """Failed ``hardware`` checks and warnings for the changed parameters (the memory budget:
    :mod:`agenticdb.validation.memory`, measured from ``observed`` gauges when they are there).

    Only budgets that a changed parameter takes part in are evaluated, so a host that was already over
    budget does not block unrelated changes.
    """
    failed: list[FailedCheck] = []
    warnings: list[str] = []
    mem_failed, mem_warnings = check_memory(cfg, before, rules, hw, policy, observed)
    failed += mem_failed
    warnings += mem_warnings
    failed += _disk(cfg, before, rules, hw, policy)
    for lim in rules.cpu_limit:
        if not lim.applies(flavor, version) or not cfg.is_changed(lim.parameter):
            continue
        n, ch = cfg.number(lim.parameter), cfg.changed[cfg.key(lim.parameter)]
        cap = lim.cap(hw.cpu_count)
        if n is not None and n > cap:
            failed.append(
                FailedCheck(
                    check="hardware",
                    parameter=ch.name,
                    value=ch.value,
                    rule_id=lim.id,
                    source=lim.source,
                    message=f"{ch.name}={ch.value} exceeds {lim.per_core:g} × {hw.cpu_count} cores"
                    f"{f' + {lim.plus:g}' if lim.plus else ''} = {cap:g} (rule {lim.id}: {lim.reason})",
                )
            )
    for ram in rules.ram_limit:
        if not ram.applies(flavor, version) or not cfg.is_changed(ram.parameter):
            continue
        n, ch = cfg.number(ram.parameter), cfg.changed[cfg.key(ram.parameter)]
        cap = ram.cap(hw.memory_limit_bytes) * ram.unit_bytes  # bytes
        if n is not None and n * ram.unit_bytes > cap:
            failed.append(
                FailedCheck(
                    check="hardware",
                    parameter=ch.name,
                    value=ch.value,
                    rule_id=ram.id,
                    source=ram.source,
                    message=f"{ch.name}={ch.value} reserves {_gib(n * ram.unit_bytes)}, more than "
                    f"{ram.fraction:g} × memory limit {_gib(hw.memory_limit_bytes)} (RAM "
                    f"{_gib(hw.memory_bytes)}, cgroup limit "
                    f"{_gib(hw.cgroup_memory_limit_bytes) if hw.cgroup_memory_limit_bytes else 'none'})"
                    f" = {_gib(cap)} (rule {ram.id}: {ram.reason})",
                )
            )
    if cfg.family == "postgresql":
        failed += _pg_huge_pages(cfg, hw)
    if cfg.family == "linux":
        failed += _overcommit(cfg, hw, policy, observed)
    return failed, warnings


def _disk(
    cfg: ResultingConfig, before: ResultingConfig, rules: RuleSet, hw: Hardware, policy: PolicyConfig
) -> list[FailedCheck]:
    budget = rules.disk_budget
    if budget is None or hw.disk_free_bytes <= 0:
        return []
    changed = [p for p in budget.parameters if cfg.is_changed(p)]
    if not changed:
        return []
    new = sum(max(cfg.number(p) or 0.0, 0.0) for p in budget.parameters)
    old = sum(max(before.number(p) or 0.0, 0.0) for p in budget.parameters)
    allowed = policy.disk_fraction * (hw.disk_free_bytes + old)
    if new <= allowed:
        return []
    ch = cfg.changed[cfg.key(changed[0])]
    return [
        FailedCheck(
            check="hardware",
            parameter=ch.name,
            value=ch.value,
            rule_id="disk_budget",
            source=budget.source,
            message=f"{ch.name}={ch.value} (rule disk_budget): {' + '.join(budget.parameters)} would reserve "
            f"{_gib(new)} on "
            f"{hw.data_device or 'the data disk'}, more than disk_fraction {policy.disk_fraction:g} × "
            f"(free {_gib(hw.disk_free_bytes)} + current {_gib(old)}) = {_gib(allowed)} — {budget.reason}",
        )
    ]


def _pg_huge_pages(cfg: ResultingConfig, hw: Hardware) -> list[FailedCheck]:
    """huge_pages=on needs reserved huge pages for the whole shared memory segment, else the postmaster
    exits at start ("could not map anonymous shared memory ... huge pages"; PostgreSQL 15 manual 20.4.1
    huge_pages and 19.4.5 Linux Huge Pages). shared_buffers is the lower bound of the segment."""
    if not (cfg.is_changed("huge_pages") or cfg.is_changed("shared_buffers")) or hw.huge_pages_bytes is None:
        return []
    if (cfg.raw("huge_pages") or "").lower() != "on":
        return []
    need = cfg.number("shared_buffers") or 0.0
    if hw.huge_pages_bytes >= need > 0:
        return []
    name = "huge_pages" if cfg.is_changed("huge_pages") else "shared_buffers"
    ch = cfg.changed[cfg.key(name)]
    return [
        FailedCheck(
            check="hardware",
            parameter=ch.name,
            value=ch.value,
            rule_id="pg.huge_pages_reserved",
            source="PostgreSQL 15 manual 20.4.1 (huge_pages), 19.4.5 Linux Huge Pages",
            message=f"{ch.name}={ch.value} (rule pg.huge_pages_reserved): huge_pages=on needs at least "
            f"shared_buffers {_gib(need)} of reserved huge pages, the host has {_gib(hw.huge_pages_bytes)} "
            "(/proc/meminfo HugePages_Total × Hugepagesize); the server would refuse to start",
        )
    ]


_OVERCOMMIT = ("vm.overcommit_memory", "vm.overcommit_ratio", "vm.overcommit_kbytes")
_SRC_OVERCOMMIT = (
    "kernel Documentation/mm/overcommit-accounting.rst; mm/util.c vm_commit_limit(); PostgreSQL 15 manual "
    "19.4.4 Linux Memory Overcommit"
)


def commit_limit(cfg: ResultingConfig, hw: Hardware) -> tuple[float, str]:
    """CommitLimit in bytes under the resulting configuration, and the formula in force as text.

    Kernel mm/util.c vm_commit_limit(): ``overcommit_kbytes`` when non-zero, else (RAM − huge pages) ×
    ``overcommit_ratio`` / 100; plus swap either way.
    """
    # writing overcommit_ratio zeroes overcommit_kbytes (vm.rst): a ratio in the set is the one in force
    ratio_written = cfg.is_changed("vm.overcommit_ratio") and not cfg.is_changed("vm.overcommit_kbytes")
    kbytes = 0.0 if ratio_written else cfg.number("vm.overcommit_kbytes") or 0.0
    swap = f"swap {_gib(hw.swap_bytes)}"
    if kbytes > 0:
        limit = kbytes * 1024 + hw.swap_bytes
        return limit, f"{swap} + overcommit_kbytes {kbytes:.0f} kB ({_gib(kbytes * 1024)}) = {_gib(limit)}"
    ratio = cfg.number("vm.overcommit_ratio")
    ratio = 50.0 if ratio is None else ratio
    huge = hw.huge_pages_bytes or 0
    ram = f"RAM {_gib(hw.memory_bytes)}" + (f" − huge pages {_gib(huge)}" if huge else "")
    limit = hw.swap_bytes + (hw.memory_bytes - huge) * ratio / 100
    return limit, f"{swap} + {ram} × overcommit_ratio {ratio:g}% = {_gib(limit)}"


def _overcommit(
    cfg: ResultingConfig, hw: Hardware, policy: PolicyConfig, observed: Observed | None
) -> list[FailedCheck]:
    """Strict overcommit (vm.overcommit_memory=2) caps every allocation at CommitLimit. It must leave room
    for what is committed today (Committed_AS), the DBMS's planned memory (shared buffers and per-connection
    memory it may still allocate) and a margin; otherwise new backends fail with out-of-memory."""
    touched = [p for p in _OVERCOMMIT if cfg.is_changed(p)]
    if not touched or cfg.number("vm.overcommit_memory") != 2:
        return []
    ch = cfg.changed[cfg.key(touched[0])]  # mode first when it is in the set
    rule = "linux.overcommit_strict"
    if hw.committed_as_bytes is None:
        return [
            FailedCheck(
                check="hardware",
                parameter=ch.name,
                value=ch.value,
                rule_id=rule,
                source=_SRC_OVERCOMMIT,
                message=f"{ch.name}={ch.value} (rule {rule}) needs the host's Committed_AS to check the commit "
                "limit under vm.overcommit_memory=2, and /proc/meminfo was not read",
            )
        ]
    limit, formula = commit_limit(cfg, hw)
    if observed is not None and observed.dbms_memory_bytes is not None:
        planned, planned_text = observed.dbms_memory_bytes, "DBMS planned memory"
    else:
        planned = policy.memory_fraction * hw.memory_limit_bytes
        planned_text = (
            f"DBMS memory budget (policy.memory_fraction {policy.memory_fraction:g} × memory limit "
            f"{_gib(hw.memory_limit_bytes)}: {_limit_text(hw)}, the lower counts)"
        )
    margin = policy.commit_headroom * hw.memory_bytes
    need = hw.committed_as_bytes + planned + margin
    if limit >= need:
        return []
    why = (
        f"with vm.overcommit_memory=2 the commit limit is {formula}, less than Committed_AS "
        f"{_gib(hw.committed_as_bytes)} + {planned_text} {_gib(planned)} + headroom {_gib(margin)} "
        f"(policy.commit_headroom {policy.commit_headroom:.0%} of RAM) = {_gib(need)}; allocations beyond it "
        "fail (new backends, sorts, buffer growth get out-of-memory)"
    )
    # every overcommit parameter of the set is part of the refused limit
    return [
        FailedCheck(
            check="hardware",
            parameter=c.name,
            value=c.value,
            rule_id=rule,
            source=_SRC_OVERCOMMIT,
            message=f"{c.name}={c.value} (rule {rule}): {why}",
        )
        for c in (cfg.changed[cfg.key(p)] for p in touched)
    ]
