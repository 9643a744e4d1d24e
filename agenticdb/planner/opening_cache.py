"""shared_buffers from the baseline's buffer misses, by access pattern (issue 36): the evidence source's cache rule.

Whether a larger shared_buffers pays depends on how the workload reads, not on the data/limit ratio alone:

- **Scans** (workload class "olap": declared, or measured by :func:`agenticdb.planner.access.workload_class`
  — most rows read by sequential scans, whole tables per statement). A sequential scan of a table larger than
  a quarter of shared_buffers reads through a small ring of buffers (PostgreSQL ``heapam.c`` ``initscan``:
  ``rs_nblocks > NBuffers / 4`` → ``BAS_BULKREAD``; ``src/backend/storage/buffer/README``, "Buffer Ring
  Replacement Strategy": 256 kB for sequential scans), so its pages do not stay in shared buffers however large
  they are, and what shared_buffers takes is taken from the kernel page cache that does serve the rescans. On
  pg-tpch (TPC-H SF 1 under 1 GiB) shared_buffers 128 → 256 MB alone measured −23 % (benchmarks/README.md).
  So: data within 40 % of the memory limit → 1.25 × the data (the rule as it was: tables under a quarter of
  it are then cached; the README's TPC-H SF 0.3 demo raised shared_buffers 128MB → 662MB this way and a
  later round kept 512MB at +19 %);
  larger data → shared_buffers kept, the page cache serves the misses. Data beyond the whole memory limit
  (no cache holds it; each scan streams more than the cache through it) → shared_buffers *lowered* to
  :func:`scan_buffers` (1/32 of the limit, at least 32 MiB) and effective_cache_size to
  :data:`SCAN_CACHE_FACTOR` × that: the shared buffers a ring-read scan cannot use are given back to the page
  cache (under a cgroup limit the two are charged to the same memory, kernel
  Documentation/admin-guide/cgroup-v1/memory.rst 2.2: page cache and shmem are both charged), and the planner
  is told that the cache "available to a single query" (manual 20.7.2) is what that query's own scans leave,
  little when they read more than the limit, so index fetches are costed as reads. Judgement, from this host's
  measurements: on pg-tpch (TPC-H SF 1, ~1.4 GiB, 1 GiB limit) TPE at 8 min and at 40 min both settled on
  shared_buffers ≈ 24 MB and effective_cache_size ≈ 85 MB, and the two together on agenticdb's kept set
  measured ~8 % faster, neither alone beyond the noise (``--fixed`` runs, benchmarks/README.md 2026-12-07);
  the race measures it on the server at hand.
- **Lookups** (class "oltp", or "mixed" whose row counters show index access): point and range reads through
  indexes go through the normal clock sweep, so pages read stay in shared buffers and a larger pool turns
  misses into hits. PostgreSQL 15 manual 20.4.1 (shared_buffers): "a reasonable starting value … is 25 % of
  the memory", and "unlikely that an allocation of more than 40 % of RAM … will work better than a smaller
  amount". So: 1.25 × the data when that is within 40 % of the memory limit (the data held with room);
  40 % when the data is larger but fits in the memory limit (shared buffers hold the hot part, the page cache
  the rest); 25 % when the data exceeds the memory limit (no cache holds it; the manual's starting value).
  On pg-sysbench-ro-fit (0.81 GiB under 2 GiB, 41 % misses) TPE's best configuration had shared_buffers
  783MB (38 % of the limit), +27 % against the default (benchmarks/README.md, 2026-12-06).
- **Unmeasured** (class "mixed" without row counters) and **borderline** (figures inside the bands of
  :func:`agenticdb.planner.access.class_call`, neither lookups nor scans for sure): as for scans (the
  conservative branch: a larger pool that does not hold the data costs page cache).

Every branch is bounded by the memory budget the set validation applies
(:mod:`agenticdb.validation.memory`): ``policy.memory_fraction`` × the memory limit, less the shared memory
that is not a configured buffer (measured: ``settings.shared_memory_size_bytes`` − the global buffers in
effect), the other global buffers of the set (wal_buffers at -1 counted at its 16 MB ceiling, manual
20.5.1), work_mem × the observed peak of backends (every allowed connection when the set raises work_mem
or the peak was not read) × hash_mem_multiplier × ``policy.per_connection_work_mem_factor``, and
maintenance_work_mem (or autovacuum_work_mem) × autovacuum_max_workers. Below :data:`MISS_RATIO` of block
reads missing, the rule does nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agenticdb.models import Observed, StateDelta
from agenticdb.planner import access
from agenticdb.planner.opening_values import GiB, MiB, SetBuilder, SourceInput, budget_bytes, delta_of
from agenticdb.units.text import a_workload
from agenticdb.validation.memory import peak_connections
from agenticdb.validation.rules import load_ruleset

MISS_RATIO = 0.05
"""Share of block reads that missed shared buffers (pg_stat_database blks_read / (blks_read + blks_hit)) below
which the cache is left alone (judgement: a few percent of misses is the warm-up and the writes' own reads)."""
SHARED_BUFFERS_LIMIT = 0.40
"""PostgreSQL 15 manual 20.4.1: more than 40 % of RAM is unlikely to work better (the playbook's limit)."""
SHARED_BUFFERS_START = 0.25
"""PostgreSQL 15 manual 20.4.1: "a reasonable starting value for shared_buffers is 25 % of the memory"."""
DATA_HEADROOM = 1.25
"""shared_buffers that holds the data: 1.25 × its size (indexes and free space grow; judgement, as MySQLTuner's
pool ≥ data check with a quarter more)."""
SCAN_BUFFERS_FLOOR = 32 * MiB
"""shared_buffers never lowered below this for scans (judgement: the catalogs, the indexes' upper levels and the
small tables a scan-bound query joins stay cached; PostgreSQL's initdb default before 9.3 was 32 MB)."""
SCAN_BUFFERS_SHARE = 1 / 32
"""shared_buffers for scans of data beyond the memory limit: this share of the limit (judgement; see the
module docstring)."""
SCAN_CACHE_FACTOR = 4
"""effective_cache_size = this × shared_buffers when scans read data beyond the memory limit (judgement: the
shared buffers plus as much again three times over of page cache left between the query's own scans;
pg-tpch's searches settled on ≈ 3.5 ×)."""
WAL_BUFFERS_AUTO_MAX = 16 * MiB
"""wal_buffers = -1 sizes itself to 1/32 of shared_buffers, at most one WAL segment, 16 MB (manual 20.5.1)."""


@dataclass(frozen=True)
class CacheSizing:
    """The rule's decision: ``value`` (bytes of shared_buffers to set; None: kept) and ``reason`` (the numbers
    and their sources; the candidate's source when set, the opening's note when kept)."""

    value: float | None
    reason: str


def access_pattern(workload_class: str, delta: StateDelta | None) -> tuple[str, str]:
    """``("scans" | "lookups" | "borderline" | "unmeasured", why)`` of the baseline (see the module docstring);
    "borderline" (figures inside ``access``'s bands, class "mixed") takes the conservative branch as "unmeasured".

    ``workload_class`` is :attr:`agenticdb.planner.opening_values.HostView.workload_class` (the declared class,
    "olap" when the counters show whole-table scans); ``delta`` the baseline's statistics for the row counters.
    """
    fig = access.scan_figures(delta)
    seen = (
        f"; {fig[0]:.0%} of rows read by sequential scans, {fig[1]:,.0f} per transaction (pg_stat_database)"
        if fig is not None
        else ""
    )
    if workload_class == "olap":
        return "scans", f"an analytic workload (class olap{seen})"
    if workload_class == "oltp":
        return "lookups", f"an OLTP workload (class oltp{seen})"
    if fig is not None and access.class_call(workload_class, delta).borderline:
        return "borderline", f"a workload borderline between lookups and scans (planner.access bands){seen}"
    if fig is not None:
        return "lookups", f"{a_workload(workload_class)} reading through indexes{seen}"
    return "unmeasured", f"{a_workload(workload_class)} whose access pattern was not measured (no row counters)"


def scans_beyond_memory(pattern: str, data: float, mem: float) -> bool:
    """Whether the scan rule that lowers the cache applies: an analytic ``pattern`` ("scans", not borderline
    or unmeasured) reading ``data`` bytes beyond the memory limit ``mem`` (bytes)."""
    return pattern == "scans" and data > mem


PROBE_SHARE = 0.25
"""Share of the baseline's time in plans that probe an index inside a nested loop (``PlanEvidence.probe_share``)
from which :func:`probe_cache` lowers effective_cache_size (judgement: a quarter of the time; pg-tpch-fit's
Q07, Q13, Q21 and Q08 are ~35 % of TPC-H SF 1's time here)."""


def probe_cache(
    pattern: str,
    probe_share: float | None,
    probing: int,
    data: float | None,
    mem: float,
    sb: float,
    ecs: float,
    *,
    miss: float | None,
    ecs_now: float | None = None,
) -> tuple[float | None, str]:
    """effective_cache_size for index probes that read beyond shared buffers: ``(bytes to set | None, why)``.

    An analytic ``pattern`` ("scans") whose plans spend at least :data:`PROBE_SHARE` of the baseline's time
    (``probe_share``, over ``probing`` statements) probing an index inside a nested loop, on ``data`` bytes that
    fit in the memory limit ``mem`` (beyond it the scan rule, :func:`scan_buffers`, lowers the cache) but not in
    shared_buffers ``sb`` (bytes, the set's value): the probes of pages shared buffers lack are each a read()
    from the kernel's page cache, while effective_cache_size ``ecs`` (bytes) tells the planner those pages are
    cached and repeated probes nearly free (PostgreSQL ``costsize.c`` ``index_pages_fetched``, Mackert–Lohman;
    manual 20.7.2: "a higher value makes it more likely index scans will be used"). Set to shared_buffers, the
    cache a probe reads without a system call, so the planner weighs those loops against hash joins over
    sequential scans. Judgement, measured on this host (benchmarks/README.md, pg-tpch-fit probe 2026-12-07:
    TPC-H SF 1 in 4 GiB, jit off, two passes each): 4GB → 128MB took the query set from 22.1 to 19.8 s; Q07
    3.1 → 0.7 s, Q13 2.3 → 0.6 s, Q18 2.6 → 4.5 s (a hash aggregate that spilled). The race measures it on the
    server at hand. ``ecs_now`` (bytes) is the value in effect, which the reason quotes (``ecs`` may be the
    set's own, already lowered by another rule; None: ``ecs``).

    Only when the baseline measured the misses: ``miss`` (the share of block reads that missed shared buffers,
    pg_stat_database blks_read / (blks_read + blks_hit); None: not measured) at least :data:`MISS_RATIO`. Data
    larger than shared_buffers does not say the probes miss: a query set that reads a hot part of it finds its
    pages in shared buffers, and the planner told they are not would trade its probes for sequential scans of
    the whole table (the cache rule does nothing below that share either).

    None and why when the plans probe that much but the misses are below that share or not measured (the
    opening's note); None and '' when another condition fails or the plans were not read.
    """
    if probe_share is None:
        return None, ""
    if pattern != "scans" or probe_share < PROBE_SHARE or data is None or data > mem or data <= sb or ecs <= sb:
        return None, ""
    probes = (
        f"{probe_share:.0%} of the baseline's time in plans that probe an index inside a nested loop "
        f"({probing} statement{'' if probing == 1 else 's'}, EXPLAIN)"
    )
    if miss is None:
        return None, (
            f"{probes}, but shared-buffer misses not measured (no pg_stat_database counters): effective_cache_size kept"
        )
    if miss < MISS_RATIO:
        return None, (
            f"{probes}, but only {miss:.1%} of block reads missed shared buffers (pg_stat_database), below "
            f"{MISS_RATIO:.0%}: shared buffers serve the probes, effective_cache_size kept"
        )
    return sb, (
        f"measured: {probes}, with {miss:.0%} of block reads missing shared buffers, on data of "
        f"{data / GiB:.2f} GiB beyond shared_buffers "
        f"({sb / MiB:.0f} MiB): a probe of a page shared buffers lack is a read() from the page cache, which "
        f"effective_cache_size {(ecs_now or ecs) / GiB:.2f} GiB in effect prices as cached (costsize.c "
        "index_pages_fetched; manual 20.7.2); set to shared_buffers. In agenticdb's own benchmark pg-tpch-fit "
        "(TPC-H SF 1 in 4 GiB, on its 2-core test host, not this server): 4GB → 128MB took its query set from 22.1 "
        "to 19.8 s; the race measures it here"
    )


BUFFERS_PER_CONNECTION = 16 * 1024
"""shared_buffers never lowered below this × max_connections (bytes): the validator's harmful rule
``pg.shared_buffers-per-connection`` (PostgreSQL 8.3 manual 18.4.1: "at least 16 kilobytes times
max_connections"; 128kB with 100 connections failed 'no unpinned buffers available' on PostgreSQL 15 here)."""


def scan_buffers(mem: float, connections: int = 0) -> float:
    """shared_buffers (bytes, whole MiB) for scans of data beyond the memory limit ``mem`` (bytes):
    :data:`SCAN_BUFFERS_SHARE` of it, at least :data:`SCAN_BUFFERS_FLOOR` and at least
    :data:`BUFFERS_PER_CONNECTION` × ``connections`` (max_connections of the set; rounded up to a MiB)."""
    low = math.floor(max(SCAN_BUFFERS_SHARE * mem, SCAN_BUFFERS_FLOOR) / MiB) * MiB
    return max(low, math.ceil(BUFFERS_PER_CONNECTION * connections / MiB) * MiB)


def size_shared_buffers(
    *,
    miss: float,
    data: float,
    mem: float,
    now: float,
    pattern: str,
    why: str,
    room: float,
    room_why: str,
    connections: int = 0,
) -> CacheSizing:
    """shared_buffers for ``miss`` (share of block reads missed), ``data`` bytes, ``mem`` (the memory limit,
    bytes), ``now`` (bytes in effect), the access ``pattern`` and its ``why`` (:func:`access_pattern`), and
    ``room`` (bytes the memory budget leaves for it, ``room_why`` its terms); ``connections`` (max_connections)
    bounds a lowered value (:func:`scan_buffers`). Pure; rules in the module docstring. Lowers shared_buffers
    only for :func:`scans_beyond_memory`."""
    fig = (
        f"buffer misses {miss:.0%}, {why}: the data ({data / GiB:.2f} GiB) against the memory limit "
        f"({mem / GiB:.2f} GiB)"
    )
    if scans_beyond_memory(pattern, data, mem):
        want = scan_buffers(mem, connections)
        rule = (
            "the data exceeds the memory limit and scans of tables larger than a quarter of shared_buffers read "
            "through a 256 kB ring (heapam.c initscan; buffer manager README), so shared buffers do not keep "
            "their pages while every MB of them is taken from the page cache that serves the rescans (one "
            f"cgroup charge): shared_buffers {SCAN_BUFFERS_SHARE * 32:g}/32 of the limit, at least "
            f"{SCAN_BUFFERS_FLOOR / MiB:.0f} MiB (judgement; pg-tpch's TPE and oracle settled near 24 MB) and at least "
            f"16 kB × max_connections {connections} (validator rule pg.shared_buffers-per-connection)"
        )
        if want >= now:
            return CacheSizing(
                None,
                f"{fig}: {rule} = {want / MiB:.0f} MiB, not below the {now / MiB:.0f} MiB in "
                "effect: shared_buffers kept",
            )
        return CacheSizing(want, f"measured: {fig}; {rule} = {want / MiB:.0f} MiB")
    hold, cap = DATA_HEADROOM * data, SHARED_BUFFERS_LIMIT * mem
    if pattern != "lookups" and data > cap:
        return CacheSizing(
            None,
            f"{fig}: the data exceeds 40 % of the memory limit"
            + ("" if pattern == "scans" else ", treated as scans (the conservative branch)")
            + "; scans of tables larger than a quarter of "
            "shared_buffers read through a 256 kB ring (heapam.c initscan; buffer manager README), so more "
            "shared buffers would not keep their pages and would shrink the kernel page cache that serves "
            "the misses (pg-tpch: 128 → 256 MB alone −23 %): shared_buffers kept",
        )
    if pattern != "lookups" or hold <= cap:
        want, rule = (
            hold,
            "the data fits in 40 % of the memory limit (manual 20.4.1's upper bound), so 1.25 × the data holds it",
        )
    elif data <= mem:
        want = cap
        rule = (
            f"1.25 × the data ({hold / MiB:.0f} MiB) exceeds 40 % of the limit, the manual's upper bound "
            "(20.4.1: more than 40 % is unlikely to work better), and the data fits in the memory "
            "limit: shared buffers hold the hot part, the page cache the rest"
        )
    else:
        want = SHARED_BUFFERS_START * mem
        rule = (
            "the data exceeds the memory limit, so no cache holds it: the manual's starting value, 25 % of the "
            "memory limit (manual 20.4.1), leaving the rest to the page cache"
        )
    want = math.floor(want / MiB) * MiB
    if want > room:
        rule += f"; capped by the memory budget at {room / MiB:.0f} MiB ({room_why})"
        want = math.floor(max(room, 0.0) / MiB) * MiB
    if want <= now:
        return CacheSizing(
            None,
            f"{fig}: {rule} = {want / MiB:.0f} MiB, not above the {now / MiB:.0f} MiB in effect: shared_buffers kept",
        )
    return CacheSizing(want, f"measured: {fig}; {rule} = {want / MiB:.0f} MiB")


def budget_room(inp: SourceInput, b: SetBuilder, grow: str = "shared_buffers") -> tuple[float, str]:
    """(bytes, terms) the memory budget leaves for ``grow`` once the rest of the set ``b`` is counted as the
    set validation counts it (module docstring; :func:`agenticdb.validation.memory.measured_estimate`, or its
    worst case when the peak of backends was not read)."""
    budget = load_ruleset(b.family).memory_budget
    allowed = budget_bytes(inp.ctx, inp.policy)
    if budget is None:
        return allowed, f"budget {allowed / MiB:.0f} MiB"
    d = delta_of(inp.ctx)
    gauges = d.gauges if d is not None else {}
    peak = peak_connections(budget, Observed(gauges=dict(gauges)))
    terms: list[tuple[str, float]] = []

    def glob(name: str, value: float | None, sb: float | None) -> float:
        if value is not None and value <= 0 and name == "wal_buffers":  # -1: sized by shared_buffers (20.5.1)
            return min(max(sb / 32, 64 * 1024), WAL_BUFFERS_AUTO_MAX) if sb is not None else WAL_BUFFERS_AUTO_MAX
        return max(value or 0.0, 0.0)

    shm = gauges.get(budget.shared_memory_gauge or "") if peak is not None else None
    if shm:
        sb_before = b.before_bytes(grow)
        before = sum(glob(n, b.before_bytes(n), sb_before) for n in budget.global_)
        terms.append(("other shared memory (measured)", max(shm - before, 0.0)))
    terms += [(n, glob(n, b.now_bytes(n), None)) for n in budget.global_ if n != grow]  # -1: at its ceiling
    mult = (b.now(budget.per_connection_multiplier) if budget.per_connection_multiplier else None) or 1.0
    factor = mult * inp.policy.per_connection_work_mem_factor
    for name in budget.per_connection:
        each, was = b.now_bytes(name) or 0.0, b.before_bytes(name) or 0.0
        raised = peak is None or each > was
        count = float(inp.host.max_connections) if raised else max(peak or 1.0, 1.0)
        who = f"{count:g} connections" if raised else f"{count:g} backends (observed peak)"
        terms.append((f"{name} × {who} × {factor:g}", each * count * factor))
    for w in budget.workers:
        each = b.now_bytes(w.get("override", "")) or 0.0
        each = each if each > 0 else b.now_bytes(w["each"]) or 0.0
        count = b.now(w["count"]) or 0.0
        terms.append((f"{w['each']} × {count:g} {w['count']}", each * count))
    room = allowed - sum(v for _, v in terms)
    text = f"budget {allowed / MiB:.0f} MiB − " + " − ".join(f"{v / MiB:.0f} MiB {k}" for k, v in terms if v > 0)
    return room, text
