"""The opening's "at the playbook's limits" candidate (issue 36): every playbook move that serves the workload
class, taken at once to its ``limit`` (``catalogs/playbook-*.toml``), inside the validator's host ceilings
(``planner.caps``) and the memory budget.

The classes' bottlenecks (judgement, from what each class spends its time on):

- OLAP (scans, joins, sorts of large tables): cpu (parallel workers per Gather up to the cores), temp_spill
  (work_mem), io_queue (random_page_cost / effective_io_concurrency for the measured device) — and
  jit = off: on pg-tpch (TPC-H SF 1 under 1 GiB, benchmarks/README.md 2026-12-05) TPE's best configuration
  had jit = off, +81.6 % against the default, while JIT compile time measured only 0.7–3 % of statement time
  (pg_stat_statements counts the leader, not the workers; measurement on this host). The buffer cache is left
  alone: scans of data larger than the cache are served by the kernel page cache (shared_buffers 128 → 256 MB
  alone measured −23 % on pg-tpch);
- OLTP: buffer_cache, wal_fsync, checkpoint, io_queue, cpu (the playbook's jit entry for OLTP);
- mixed: buffer_cache, checkpoint, io_queue, cpu, temp_spill.

The diagnosis's top bottleneck is added when it is not among the class's (except buffer_cache for OLAP when
the data does not fit in 40 % of the memory limit). Never moved: max_connections (a
DBA's requirement), maintenance_work_mem (it serves no query and counts once per autovacuum worker).
work_mem takes only what the budget holds with every allowed connection × hash_mem_multiplier. Random I/O
knobs follow the device: the playbook's flash limits — random_page_cost 1.1 on SSD/NVMe or when the data fits in
memory (PGTune's rule), effective_io_concurrency 1000 / innodb_io_capacity only on SSD/NVMe; on a rotating disk
they are left as they are. They are also left when the baseline's counters rule out an I/O wait (io_queue):
then they serve no wait and only move the planner towards index scans — on pg-tpch-fit (TPC-H SF 1 in memory,
4 GiB, 2026-12-06, benchmarks/README.md) the set with random_page_cost 1.1 screened −31 % against the start
while TPE's best kept 2.62. Likewise an entry whose playbook ``needs`` names the counter its problem shows in
is left when the baseline measured that counter and it did not grow (innodb_log_buffer_size without any
Innodb_log_waits: ``PlaybookEntry.needs``); without the counter it is taken as before.
"""

from __future__ import annotations

import math

from agenticdb.models import Bottleneck, StateDelta
from agenticdb.planner import access
from agenticdb.planner.caps import host_cap
from agenticdb.planner.context import latest_measurement
from agenticdb.planner.diagnosis import Hypothesis, diagnose
from agenticdb.planner.opening_types import Candidate
from agenticdb.planner.opening_values import (
    HostView,
    MiB,
    SetBuilder,
    SourceInput,
    SourceOutput,
    current_config,
    delta_of,
    per_connection_room,
)
from agenticdb.planner.playbook import HostFacts, Playbook, PlaybookEntry, load_playbook, size
from agenticdb.units import unit_bytes
from agenticdb.units.text import a_workload

_B = Bottleneck
CLASS_BOTTLENECKS: dict[str, tuple[Bottleneck, ...]] = {
    "olap": (_B.cpu, _B.temp_spill, _B.io_queue),
    "oltp": (_B.buffer_cache, _B.wal_fsync, _B.checkpoint, _B.io_queue, _B.cpu),
    "mixed": (_B.buffer_cache, _B.checkpoint, _B.io_queue, _B.cpu, _B.temp_spill),
}
NEVER = frozenset({"max_connections", "maintenance_work_mem"})
_RANDOM_IO = frozenset({"random_page_cost", "effective_io_concurrency", "innodb_io_capacity", "innodb_io_capacity_max"})
_PER_CONNECTION = frozenset({"work_mem"})
PGTPCH_JIT = (
    "set at the limits whatever this baseline's JIT share (pg_stat_statements counts the leader's compile time, "
    "not the workers'): in agenticdb's own benchmark pg-tpch (TPC-H SF 1 under 1 GiB, on its 2-core test host, "
    "not this server) TPE's best configuration had jit = off, +81.6 % vs the default (benchmarks/README.md, "
    "2026-12-05); the race measures it here; PostgreSQL 15 manual 32.2 When to JIT?"
)


def at_limits(inp: SourceInput) -> SourceOutput:
    """The candidate at the playbook's limits for the workload class (see the module docstring)."""
    ctx, host = inp.ctx, inp.host
    try:
        book = load_playbook(host.flavor)
    except ValueError as exc:
        return SourceOutput(None, str(exc))
    cls = host.workload_class
    wanted = list(CLASS_BOTTLENECKS.get(cls, CLASS_BOTTLENECKS["mixed"]))
    notes: list[str] = []
    hyps = _hypotheses(inp)
    scored = [h for h in hyps if not h.ruled_out and h.score > 0]
    top = max(scored, key=lambda h: h.score).bottleneck if scored else None
    io_absent = next((h.ruled_out for h in hyps if h.bottleneck == Bottleneck.io_queue and _measured(h)), None)
    left = access.page_cache_serves(cls, host.data_bytes, host.memory_bytes, host.family) if host.data_bytes else None
    # not measured: the conservative branch (PostgreSQL's, as page_cache_serves)
    unmeasured_olap = host.family == "postgresql" and cls == "olap" and host.data_bytes is None
    if top == Bottleneck.buffer_cache and (left or unmeasured_olap):
        notes.append(
            "limits: buffer_cache diagnosed, but an analytic workload's data larger than 40 % of the memory limit "
            "is left to the kernel page cache (shared_buffers 128 → 256 MB alone measured −23 % on pg-tpch)"
        )
    elif top is not None and top not in wanted:
        wanted.append(top)
    b = SetBuilder(ctx)
    facts = HostFacts.of(ctx.profile.hardware, current_config(ctx))
    no_wait: list[str] = []  # random-I/O knobs left because the baseline measured no I/O wait
    entries = _needed(_entries(book, wanted, cls), delta_of(ctx), notes)
    for entry in entries:
        if entry.knob in NEVER or entry.knob in b.changes or entry.knob in _PER_CONNECTION:
            continue
        if not _random_io_left(entry.knob, host, io_absent, notes, no_wait):
            _take(inp, b, entry, facts)
    if no_wait:  # one note for the knobs it leaves, the measurement whole (never cut)
        notes.append(f"limits: {', '.join(no_wait)} left: the baseline measured no I/O wait ({io_absent})")
    if host.family == "postgresql" and cls == "olap" and "jit" in ctx.catalog.knobs:
        b.put("jit", "off", PGTPCH_JIT)
    for entry in entries:
        if entry.knob in _PER_CONNECTION:
            _work_mem(inp, b, entry, facts, notes)
    if not b.changes:
        return SourceOutput(None, f"every playbook move for {cls} is at its limit already", notes)
    cand = Candidate(
        name="limits",
        changes=dict(b.changes),
        rationale=f"the playbook's moves for {a_workload(cls)} ({', '.join(x.value for x in wanted)}) at their "
        "limits at once, inside the host's ceilings and the memory budget",
        sources=dict(b.sources),
    )
    return SourceOutput(cand, "", notes)


def _entries(book: Playbook, wanted: list[Bottleneck], cls: str) -> list[PlaybookEntry]:
    """The playbook's entries for ``wanted`` bottlenecks (in that order) that serve workload class ``cls``."""
    return [e for bn in wanted for e in book.entries_for(bn) if not e.workload_classes or cls in e.workload_classes]


def _needed(entries: list[PlaybookEntry], delta: StateDelta | None, notes: list[str]) -> list[PlaybookEntry]:
    """``entries`` without those whose problem the baseline's counters measured absent (``PlaybookEntry.needs``:
    ``limits: innodb_log_buffer_size left: Innodb_log_waits = 0 measured`` in ``notes``, which the opening
    journals); without statistics, or without the counter in them, every entry stays."""
    kept = []
    for e in entries:
        why = e.needs.ruled_out(delta) if e.needs is not None and delta is not None else None
        if why is None:
            kept.append(e)
        elif (note := f"limits: {e.knob} left: {why}") not in notes:
            notes.append(note)
    return kept


def _hypotheses(inp: SourceInput) -> list[Hypothesis]:
    """The diagnosis of the baseline's statistics (empty without them)."""
    d = delta_of(inp.ctx)
    if d is None:
        return []
    # the run it came from: a query set's counters read per query, as the heuristic planner reads them
    return diagnose(d, inp.ctx.profile, inp.ctx.catalog.target, inp.ctx.stage, latest_measurement(inp.ctx))


def _random_io_left(knob: str, host: HostView, io_absent: str | None, notes: list[str], no_wait: list[str]) -> bool:
    """Whether the limits set leaves ``knob``, and why: a random-I/O knob the data device does not call for
    (random reads are cheap on flash or when the data fits in memory, prefetch depth is the device's) gets its
    note in ``notes``; one the baseline measured no I/O wait for (``io_absent``: the io_queue hypothesis's
    ruled-out text) joins ``no_wait``, told in one note by the caller."""
    if knob not in _RANDOM_IO:
        return False
    flash = host.storage in ("ssd", "nvme")
    cached = flash or (host.data_bytes is not None and host.data_bytes < host.memory_bytes)
    if not (cached if knob == "random_page_cost" else flash):
        notes.append(f"limits: {knob} left for the {host.storage} data device")
        return True
    if io_absent is not None:
        no_wait.append(knob)
        return True
    return False


def _measured(h: Hypothesis) -> bool:
    """True when ``h`` was ruled out by its counters, not for the lack of them."""
    return h.ruled_out is not None and not h.ruled_out.startswith("no counters")


def _take(inp: SourceInput, b: SetBuilder, entry: PlaybookEntry, facts: HostFacts) -> None:
    spec = b.spec(entry.knob)
    if spec is None:
        return
    src = f"playbook {entry.bottleneck.value} limit ({entry.source})"
    if entry.direction == "set":
        value = entry.value
        if value is None:
            allowed = [v.lower() for v in spec.enum_values or []]
            value = next((p for p in entry.prefer if p.lower() in allowed), None)
        if value is not None and (b.current.get(entry.knob) or "").lower() not in entry.unless_current_in:
            b.put(entry.knob, value, src)
        return
    if entry.limit is None:
        return
    now = b.now(entry.knob)
    target = size(entry.limit, facts, spec, now)
    if target is None:
        return
    cap = host_cap(inp.ctx, entry.knob)
    if cap is not None and entry.direction == "up":
        target = min(target, cap)
        src += f"; within the validator's host ceiling {cap:g}"
    if now is not None and (
        (entry.direction == "up" and target <= now) or (entry.direction == "down" and target >= now)
    ):
        return
    if entry.knob.startswith("innodb_log_file") or entry.knob == "innodb_redo_log_capacity":
        pool = b.now("innodb_buffer_pool_size")
        if pool is not None and target > pool:
            target, src = pool, src + "; at most the buffer pool's size (judgement: a larger redo buys no more)"
    b.put(entry.knob, target, src)


def _work_mem(inp: SourceInput, b: SetBuilder, entry: PlaybookEntry, facts: HostFacts, notes: list[str]) -> None:
    spec = b.spec(entry.knob)
    if spec is None or entry.limit is None:
        return
    ub = unit_bytes(spec.unit) or 1
    limit = size(entry.limit, facts, spec, b.now(entry.knob))
    committed = (
        (b.now_bytes("shared_buffers") or 0.0)
        + (b.now_bytes("wal_buffers") or 16 * MiB)
        + (b.now_bytes("maintenance_work_mem") or 64 * MiB) * (b.now("autovacuum_max_workers") or 3.0)
    )
    mult = b.now("hash_mem_multiplier") or 1.0
    room = per_connection_room(committed, inp.ctx, inp.policy, inp.host.max_connections, mult)
    want = min((limit or 0.0) * ub, room)
    want = math.floor(want / MiB) * MiB if want >= MiB else want
    now = b.now_bytes(entry.knob) or 0.0
    if want <= now:
        notes.append(
            f"limits: {entry.knob} at the budget already ({room / MiB:.1f} MiB per connection for "
            f"{inp.host.max_connections} connections × hash_mem_multiplier {mult:g})"
        )
        return
    b.put_bytes(
        entry.knob,
        want,
        f"playbook temp_spill limit ({entry.source}), capped by the memory budget: {room / MiB:.1f} MiB for each of "
        f"{inp.host.max_connections} connections × hash_mem_multiplier {mult:g}",
    )
