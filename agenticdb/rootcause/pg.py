"""PostgreSQL root-cause detectors: stale statistics, missing index, vacuum held back, lock chains and
idle-in-transaction sessions holding locks (issue 40). Thresholds: ``catalogs/causes.toml``.

Each detector turns what :mod:`agenticdb.rootcause.pg_read` read into findings (score, evidence,
remedies) or a ruled-out line with its figures. Counters are differences over the observation window
when a snapshot before it exists, else cumulative since the statistics were last reset (said in the
evidence).
"""

from __future__ import annotations

from typing import Any

import psycopg
import structlog
from psycopg import sql

from agenticdb.rootcause import pg_read as rd
from agenticdb.rootcause.model import Cause, Finding, Remedy, RootCauses, RuledOut, ramp, stable_id, t
from agenticdb.units.text import clip

FAMILY = "postgresql"
MANUAL_ANALYZE = "PostgreSQL 15 manual 25.1.3 Updating Planner Statistics and 25.1.6 The Autovacuum Daemon"
MANUAL_VACUUM = (
    "PostgreSQL 15 manual 25.1.5 Preventing Transaction ID Wraparound Failures / 25.1.2 Recovering Disk Space"
)
MANUAL_INDEX = "PostgreSQL 15 manual 11.1 Indexes Introduction and CREATE INDEX (Building Indexes Concurrently)"
MANUAL_SELECTIVE = "PostgreSQL 15 manual 11.1 / 11.8 and 14.1"
"""Where an index helps only a filter keeping few rows (the ``index_kept_share_max`` threshold's basis)."""
UNMEASURED_SELECTIVITY = 0.75
"""Factor on a missing-index score when the filter's selectivity was not measured (no plan of the statement,
no pg_stats estimate): the scans are measured, whether an index would be used is not (judgement: a table
taking nearly all the reads stays dominant, ramp 1.0 × 0.75 ≥ dominant_score 0.6; one below ~70 % of the
reads becomes a suspect)."""
COUNTERS_ONLY = 0.5
"""Factor on a stale-statistics score without a row misestimate in a plan (judgement, see the detector)."""
MANUAL_LOCKS = (
    "PostgreSQL 15 manual 13.3 Explicit Locking, 9.26 pg_blocking_pids(), 20.11 idle_in_transaction_session_timeout"
)


log = structlog.get_logger(__name__)


def _qualified(name: str) -> sql.Composed:
    schema, _, rel = name.partition(".")
    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(rel))


def _as_text(c: sql.Composable) -> str:
    return c.as_string(None)  # identifiers quoted without a connection (psycopg 3.2+)


def _setting(snap: rd.Snapshot, name: str, fallback: str) -> float:
    try:
        return float(snap.settings.get(name, ""))
    except ValueError:
        return t(fallback)


class _Window:
    """Counter differences between ``before`` (may be None: cumulative) and ``after``."""

    def __init__(self, before: rd.Snapshot | None, after: rd.Snapshot) -> None:
        self.before, self.after = before, after
        self.label = (
            f"over the {after.at - before.at:.0f}-s window" if before is not None else "cumulative since stats reset"
        )

    def diff(self, name: str, attr: str) -> int:
        now = int(getattr(self.after.tables[name], attr))
        if self.before is None or name not in self.before.tables:
            return now
        return max(0, now - int(getattr(self.before.tables[name], attr)))


def stale_statistics(w: _Window, plans: rd.PlanEvidence, server: str, out: RootCauses) -> None:
    """Tables modified beyond the autovacuum analyze threshold since their last ANALYZE (manual 25.1.6:
    threshold = autovacuum_analyze_threshold + autovacuum_analyze_scale_factor × reltuples), scored by
    the modified share and, where the benchmark's statements were explained, the worst row-estimate error
    on the table."""
    snap = w.after
    base = _setting(snap, "autovacuum_analyze_threshold", "pg_analyze_base")
    scale = _setting(snap, "autovacuum_analyze_scale_factor", "pg_analyze_scale")
    auto_on = snap.settings.get("autovacuum", "on") == "on"
    min_rows, certain = t("min_table_rows"), t("stale_share_certain")
    checked = 0
    for ts in snap.tables.values():
        if ts.rows < min_rows and ts.n_live < min_rows:
            continue
        checked += 1
        rows = max(ts.rows, 1.0)
        threshold = base + scale * max(ts.reltuples, 0.0)
        share = ts.n_mod / rows
        err = plans.error.get(ts.relname)
        # below the autovacuum threshold a table still counts when a plan misestimates it at least twofold
        # and it changed since its ANALYZE (judgement: ≥ 1 % of its rows; the remedy's plan check decides):
        # pg-rc-stale-stats changed 100,000 of 1 M rows — 50 rows short of the 100,050 threshold — and
        # its join planned for 1 row
        misread = err is not None and err[0] >= 2.0 and share >= 0.01
        if ts.analyzed and ts.n_mod <= threshold and not misread:
            continue
        score = 1.0 if not ts.analyzed else ramp(share, threshold / rows, certain)
        cmp = ">" if ts.n_mod > threshold else "≤"
        ev = [
            f"{ts.name}: n_mod_since_analyze {ts.n_mod:,} of reltuples {ts.reltuples:,.0f} ({share:.0%}) {cmp} analyze "
            f"threshold {base:g} + {scale:g} × reltuples = {threshold:,.0f} (pg_stat_user_tables)"
            if ts.analyzed
            else f"{ts.name}: never analyzed, {ts.n_live:,} live rows (pg_stat_user_tables)"
        ]
        heals = auto_on and ts.autovacuum_enabled
        ev.append(
            "autovacuum will analyze it on its next pass (enabled for the table)"
            if heals
            else f"autovacuum cannot heal it: {'autovacuum = off' if not auto_on else 'autovacuum_enabled = off'}"
            " for the table"
        )
        if heals:
            score *= 0.5  # judgement: autoanalyze is due; stale only until its next pass
        if err is not None:
            factor, est, act, stmt = err
            ev.append(
                f"plan evidence (EXPLAIN ANALYZE of the benchmark's statements): rows estimated {est:,.0f}, "
                f"actual {act:,.0f} ({factor:,.1f}×) on {ts.relname} in {stmt!r}"
            )
            score = max(score, ramp(factor, 2.0, t("estimate_error_certain")) * (0.5 if heals else 1.0))
        else:
            # judgement: modification counts say the statistics are old, not that they mislead a plan;
            # alone they make the table a suspect below the dominance threshold
            score *= COUNTERS_ONLY
            ev.append(
                f"plan evidence: {ts.relname} not misestimated in the {plans.explained} statement(s) explained"
                if plans.explained
                else f"plan evidence: none ({'; '.join(plans.problems[:2])}); table counters only"
                if plans.problems
                else "plan evidence: none (no benchmark statements to EXPLAIN; table counters only)"
            )
        reads = w.diff(ts.name, "seq_tup_read") + w.diff(ts.name, "idx_tup_fetch")
        ever = ts.seq_tup_read + ts.idx_tup_fetch
        if reads > 0:
            ev.append(f"read by the workload: {reads:,} tuples {w.label}")
        elif ever > 0:  # an idle window (advise on a quiet server): the cumulative counters speak
            ev.append(f"not read {w.label} (idle window); {ever:,} tuples read since stats reset")
        else:
            score *= 0.3
            ev.append("never read since stats reset: it cannot explain a slowdown")
        stmt_sql = _as_text(sql.SQL("ANALYZE {}").format(_qualified(ts.name)))
        out.findings.append(
            Finding(
                id=stable_id(server, Cause.stale_statistics, ts.name),
                cause=Cause.stale_statistics,
                family=FAMILY,
                subject=ts.name,
                score=round(min(1.0, score), 3),
                summary=f"stale statistics on {ts.name}: {share:.0%} of its rows changed since the last ANALYZE",
                evidence=ev,
                remedies=[
                    Remedy(
                        sql=stmt_sql,
                        automatic=True,
                        lock_impact="SHARE UPDATE EXCLUSIVE: reads and writes continue; reads a sample of the table",
                        verify="the plans of the statements on the table change and their row estimates come close",
                        table=ts.name,
                    )
                ],
                source=MANUAL_ANALYZE,
                tables=[ts.name, ts.relname],
            )
        )
    if not any(f.cause == Cause.stale_statistics for f in out.findings):
        out.ruled_out.append(
            RuledOut(
                cause=Cause.stale_statistics,
                reason=f"{checked} table(s) of ≥ {min_rows:,.0f} rows, none modified beyond its analyze threshold "
                f"({base:g} + {scale:g} × reltuples)",
            )
        )


def missing_index(
    conn: psycopg.Connection[Any],
    w: _Window,
    plans: rd.PlanEvidence,
    statements: list[tuple[str, int, float]],
    server: str,
    out: RootCauses,
) -> None:
    """Large tables the workload reads by full sequential scans for most of its reads, with the predicate
    column from the statements' plans (Seq Scan Filter) or pg_stat_statements; an index already leading
    with that column rules the cause out (the planner avoids it: a setting or cost question).

    Selectivity: an index helps only a filter that keeps few rows (manual 11.1, 11.8, 14.1). Every predicate
    column keeping more than ``index_kept_share_max`` of the rows (catalogs/causes.toml) rules the cause out
    ("predicate not selective"): the full scans are the workload's own, e.g. an analytic scan. The share is
    measured in the statements' plans, else estimated from pg_stats (:func:`_kept_shares`); where neither
    knows it, the finding stays with its score × ``UNMEASURED_SELECTIVITY`` and says "selectivity not
    measured". The index proposed is on the most selective measured column."""
    snap = w.after
    total = sum(w.diff(n, "seq_tup_read") + w.diff(n, "idx_tup_fetch") for n in snap.tables) or 1
    min_rows, certain = t("min_table_rows"), t("seq_read_share_certain")
    limit = t("index_kept_share_max")
    reasons: list[str] = []
    for ts in snap.tables.values():
        rows = max(ts.rows, float(ts.n_live))
        scans, read = w.diff(ts.name, "seq_scan"), w.diff(ts.name, "seq_tup_read")
        if rows < min_rows or scans == 0:
            continue
        share = read / total
        # a parallel sequential scan counts one scan per participant, each reading its part of the table: the
        # statements' plans say how many shared one (1 when not explained); 0.2 is judgement (a scan stopped
        # early by a LIMIT reads less)
        full = min(1.0, read * plans.seq_participants.get(ts.relname, 1) / scans / max(rows, 1.0))
        if share < 0.3 or full < 0.2:
            reasons.append(
                f"{ts.name}: {scans:,} seq scans read {share:.0%} of tuples ({w.label}), {full:.0%} per scan"
            )
            continue
        cols, ops, where = _predicates(conn, ts, plans, statements)
        indexed = rd.indexed_leading_columns(conn, ts.name)
        covered = {c: indexed[c] for c in cols if c in indexed}
        if covered:
            names = ", ".join(f"{i} on {c}" for c, i in covered.items())
            out.ruled_out.append(
                RuledOut(
                    cause=Cause.missing_index,
                    reason=f"{ts.name} is read by sequential scans ({share:.0%} of tuples {w.label}) although "
                    f"index(es) {names} exist: the planner avoids them — planner settings or costs (a knob) "
                    "or a predicate that is not selective",
                )
            )
            continue
        known = _kept_shares(conn, ts, cols, plans, ops)
        if cols and len(known) == len(cols) and min(k for k, _ in known.values()) > limit:
            said = "; ".join(f"{c} keeps {k:.0%} of the rows ({how})" for c, (k, how) in sorted(known.items()))
            reason = (
                f"{ts.name}: predicate not selective: {said}; an index would not be used ({MANUAL_SELECTIVE}: "
                f"worth it below {limit:.0%}) — its {scans:,} sequential scans ({share:.0%} of tuples {w.label}) "
                "are the workload's own"
            )
            out.ruled_out.append(RuledOut(cause=Cause.missing_index, reason=reason))
            log.info("rootcause.missing_index_ruled_out", table=ts.name, reason=reason)
            continue
        selective = sorted((k, c) for c, (k, _) in known.items() if k <= limit)
        unknown = sorted(c for c in cols if c not in known)
        col = selective[0][1] if selective else (unknown[0] if unknown else None)
        ev = [
            f"{ts.name}: {scans:,} sequential scans read {read:,} tuples = {share:.0%} of the tuples read by the "
            f"workload ({w.label}); {full:.0%} of the table per scan; {rows:,.0f} rows (pg_stat_user_tables)",
            f"predicate column(s) from {where}: {', '.join(sorted(cols))}; no index leads with them"
            if cols
            else "no predicate column found (no statements explained, pg_stat_statements silent)",
        ]
        selectivity = (
            f"{col} keeps {known[col][0]:.2%} of the rows ({known[col][1]}); ≤ {limit:.0%}: selective enough "
            f"for an index ({MANUAL_SELECTIVE})"
            if col is not None and col in known
            else "selectivity not measured"
            + (f" for {col} (no plan of the statement, no pg_stats estimate for its operator)" if col else "")
            + ": confidence lowered"
        )
        ev.append(selectivity)
        ev += [
            f"not proposed: {c} keeps {k:.0%} of the rows ({how}), not selective"
            for c, (k, how) in sorted(known.items())
            if k > limit
        ]
        remedies = [_create_index(ts, col)] if col is not None else []
        score = ramp(share, 0.3, certain) * (1.0 if col else 0.5)
        if col is None or col not in known:
            score *= UNMEASURED_SELECTIVITY
        log.info("rootcause.missing_index_found", table=ts.name, column=col, score=round(score, 3), reason=selectivity)
        out.findings.append(
            Finding(
                id=stable_id(server, Cause.missing_index, ts.name, col or ""),
                cause=Cause.missing_index,
                family=FAMILY,
                subject=f"{ts.name}({col})" if col else ts.name,
                score=round(score, 3),
                summary=f"missing index: {ts.name} read by full sequential scans"
                + (f" filtering on {col}" if col else ""),
                evidence=ev,
                remedies=remedies,
                source=MANUAL_INDEX,
                tables=[ts.name, ts.relname],
            )
        )
    if not any(f.cause == Cause.missing_index for f in out.findings) and not any(
        r.cause == Cause.missing_index for r in out.ruled_out
    ):
        detail = "; ".join(reasons[:3]) or f"no table of ≥ {min_rows:,.0f} rows read by sequential scans ({w.label})"
        out.ruled_out.append(RuledOut(cause=Cause.missing_index, reason=detail))


def _predicates(
    conn: psycopg.Connection[Any],
    ts: rd.TableStats,
    plans: rd.PlanEvidence,
    statements: list[tuple[str, int, float]],
) -> tuple[set[str], dict[str, set[str]], str]:
    """(predicate columns of ``ts``, column → operators when read from normalised texts, where they were
    read): the Seq Scan Filters of the statements' plans, else the join conditions (Hash/Merge Cond) of the
    joins over its Seq Scans there, else the WHERE and JOIN … ON conditions of pg_stat_statements' texts
    that read the table — only the columns those texts qualify with its name or alias (or leave unqualified
    when it is the statement's one table) and that the table has (:func:`~agenticdb.rootcause.pg_read.
    statement_predicates`): a column of another table of a join is never attributed to it."""
    cols = set(plans.seq_filters.get(ts.relname, set()))
    if cols:
        return cols, {}, "the plans of the benchmark's statements (Seq Scan Filter)"
    cols = set(plans.seq_joins.get(ts.relname, set()))
    if cols:
        return cols, {}, "the plans of the benchmark's statements (join condition over a Seq Scan)"
    ops: dict[str, set[str]] = {}
    own = rd.table_columns(conn, ts.name) if statements else set()
    for text, _calls, _ms in statements:
        for c, o in rd.statement_predicates(text, ts.relname, own).items():
            ops.setdefault(c, set()).update(o)
    return set(ops), ops, "pg_stat_statements (normalised texts)" if ops else ""


def _create_index(ts: rd.TableStats, col: str) -> Remedy:
    """``CREATE INDEX CONCURRENTLY`` on ``col`` of ``ts`` (manual: CREATE INDEX, Building Indexes Concurrently)."""
    idx = f"{ts.relname}_{col}_idx"[:63]
    return Remedy(
        sql=_as_text(
            sql.SQL("CREATE INDEX CONCURRENTLY {} ON {} ({})").format(
                sql.Identifier(idx), _qualified(ts.name), sql.Identifier(col)
            )
        ),
        automatic=True,
        lock_impact="SHARE UPDATE EXCLUSIVE: writes continue; two table scans; an index left INVALID "
        "by a failure is dropped again (DROP INDEX CONCURRENTLY)",
        verify="the statements' plans use the index and seq_scan on the table stops growing",
        table=ts.name,
    )


def _kept_shares(
    conn: psycopg.Connection[Any],
    ts: rd.TableStats,
    cols: set[str],
    plans: rd.PlanEvidence,
    ops: dict[str, set[str]],
) -> dict[str, tuple[float, str]]:
    """Predicate column → (share of the table's rows its filter keeps, how that share is known), for the
    columns where it is known: measured in the plans of the benchmark's statements (Seq Scan "Actual Rows"
    against "Rows Removed by Filter", per loop) when they were explained, else estimated from pg_stats for
    an ``=`` or ``<>`` comparison with an unknown constant (the planner's own estimate, see
    :func:`~agenticdb.rootcause.pg_read.equality_share`). Ranges, IN and LIKE on normalised texts are not
    estimated (their constants decide): such columns are left out (selectivity not measured)."""
    out: dict[str, tuple[float, str]] = {}
    measured = plans.seq_kept.get(ts.relname, {})
    for c in cols:
        if c in measured:
            out[c] = (measured[c], "measured: Seq Scan actual rows against rows removed by filter, EXPLAIN ANALYZE")
            continue
        found = ops.get(c, set())
        if not found or found - {"=", "<>"}:
            continue
        est = rd.equality_share(conn, ts.name, c, max(ts.rows, float(ts.n_live)))
        if est is None:
            continue
        eq, null = est
        shares = [eq if op == "=" else max(0.0, 1.0 - eq - null) for op in found]
        ops_said = " / ".join(f"{c} {op} $n" for op in sorted(found))
        out[c] = (min(shares), f"estimated from pg_stats for {ops_said}, constants unknown: an estimate")
    return out


def vacuum_held_back(w: _Window, hold: list[rd.Holder], server: str, out: RootCauses) -> None:
    """Dead tuples beyond the autovacuum vacuum threshold (manual 25.1.6) while something old holds the
    xmin horizon: a long or idle-in-transaction session, a replication slot or a prepared transaction."""
    snap = w.after
    base = _setting(snap, "autovacuum_vacuum_threshold", "pg_vacuum_base")
    scale = _setting(snap, "autovacuum_vacuum_scale_factor", "pg_vacuum_scale")
    worst = max(
        snap.tables.values(),
        key=lambda ts: ts.n_dead / (base + scale * max(ts.reltuples, 0.0)),
        default=None,
    )
    old = [h for h in hold if h.kind != "session" or (h.age_s or 0) >= t("holder_age_s")]
    if worst is None:
        out.ruled_out.append(RuledOut(cause=Cause.vacuum_held_back, reason="no user tables"))
        return
    threshold = base + scale * max(worst.reltuples, 0.0)
    over = worst.n_dead / threshold
    if over < 1.0 or not old:
        why = f"worst table {worst.name}: n_dead_tup {worst.n_dead:,} = {over:.1f} × its vacuum threshold"
        who = (
            f"; no transaction, slot or prepared transaction older than {t('holder_age_s'):g} s holds the xmin horizon"
            if not old
            else f"; oldest holder: {old[0].describe()}"
        )
        out.ruled_out.append(RuledOut(cause=Cause.vacuum_held_back, reason=why + who))
        return
    h = old[0]
    remedies = [_release(h)]
    remedies.append(
        Remedy(
            sql=_as_text(sql.SQL("VACUUM (VERBOSE) {}").format(_qualified(worst.name))),
            automatic=True,
            lock_impact="SHARE UPDATE EXCLUSIVE: reads and writes continue; removes nothing the holder still sees",
            verify="VERBOSE reports removed tuples; n_dead_tup falls (only after the holder ends)",
            table=worst.name,
        )
    )
    out.findings.append(
        Finding(
            id=stable_id(server, Cause.vacuum_held_back, h.kind, worst.name),
            cause=Cause.vacuum_held_back,
            family=FAMILY,
            subject=worst.name,
            score=round(ramp(over, 1.0, t("dead_over_threshold_certain")), 3),
            summary=f"vacuum held back on {worst.name} by {h.kind} {h.ident} ({h.state})",
            evidence=[
                f"{worst.name}: n_dead_tup {worst.n_dead:,} = {over:.1f} × its vacuum threshold {base:g} + {scale:g} × "
                f"reltuples = {threshold:,.0f} (pg_stat_user_tables)",
                f"oldest xmin held by {h.describe()} (pg_stat_activity / pg_replication_slots / pg_prepared_xacts)",
            ],
            remedies=remedies,
            source=MANUAL_VACUUM,
            tables=[worst.name, worst.relname],
        )
    )


def _release(h: rd.Holder) -> Remedy:
    if h.kind == "slot":
        return Remedy(
            sql=f"SELECT pg_drop_replication_slot({h.ident})",
            automatic=False,
            lock_impact="destructive: the consumer of the slot loses its position and must be re-seeded",
        )
    if h.kind == "prepared":
        return Remedy(
            sql=f"ROLLBACK PREPARED {h.ident}",
            automatic=False,
            lock_impact="destructive: the prepared transaction's work is lost (COMMIT PREPARED if it must persist)",
        )
    pid = h.ident.removeprefix("pid ")
    return Remedy(
        sql=f"SELECT pg_terminate_backend({pid})",
        automatic=False,
        lock_impact="destructive: the session's open transaction is rolled back and its client disconnected; "
        "fix the application (or set idle_in_transaction_session_timeout for that role)",
    )


def lock_chains(samples: list[rd.LockSample], hold: list[rd.Holder], server: str, out: RootCauses, w: _Window) -> None:
    """Sessions waiting on locks (pg_blocking_pids sampled during the window) and the root holder they
    wait behind; idle-in-transaction sessions holding locks on tables even when nobody waits now."""
    idle = [
        h
        for h in hold
        if h.kind == "session"
        and h.state.startswith("idle in transaction")
        and h.tables
        and (h.age_s or 0) >= t("holder_age_s")
    ]
    old_age = t("holder_age_s")
    # only waits behind a holder older than holder_age_s count: short holders are the workload's own
    # contention on hot rows (a knob-side lock_contention matter), not a stuck session
    waited = [s for s in samples if s.waiters > 0 and any(r[1] >= old_age for r in s.roots.values())]
    share = len(waited) / len(samples) if samples else 0.0
    roots: dict[int, tuple[str, float, str]] = {}
    for s in waited:
        roots.update({pid: r for pid, r in s.roots.items() if r[1] >= old_age})
    short = sum(1 for s in samples if s.waiters > 0) - len(waited)
    mean_waiters = sum(s.waiters for s in waited) / len(waited) if waited else 0.0
    sampled = (
        f"{len(waited)} of {len(samples)} lock samples (pg_blocking_pids, ~1 s apart) had waiters behind a holder "
        f"older than {old_age:g} s"
        + (f" ({short} more behind short-lived holders: workload contention)" if short else "")
    )
    score_waits = ramp(share, 0.1, t("lock_wait_share_certain"))
    for pid, (state, age, query) in sorted(roots.items()):
        idle_root = state.startswith("idle in transaction")
        cause = Cause.idle_in_transaction if idle_root else Cause.lock_chain
        h = next((x for x in hold if x.ident == f"pid {pid}"), None)
        tables = h.tables if h else []
        out.findings.append(
            Finding(
                id=stable_id(server, cause, "root", ",".join(sorted(tables)) or query[:60]),
                cause=cause,
                family=FAMILY,
                subject=f"pid {pid}",
                score=round(score_waits, 3),
                summary=(
                    f"lock chain: pid {pid} {state} for {age:,.0f} s holds locks"
                    + (f" on {', '.join(tables)}" if tables else "")
                    + f"; {mean_waiters:.1f} session(s) wait behind it"
                ),
                evidence=[
                    sampled + f", {mean_waiters:.1f} waiting on average",
                    f"root holder pid {pid}: state {state!r}, transaction age {age:,.0f} s, "
                    f"statement {clip(query, 150)!r}",
                ],
                remedies=[_release(rd.Holder("session", f"pid {pid}", state, age, 0))]
                + ([] if idle_root else [_cancel(pid)]),
                source=MANUAL_LOCKS,
                tables=tables,
            )
        )
    seen = {f.subject for f in out.findings}
    for h in idle:
        if h.ident in seen:
            continue
        out.findings.append(
            Finding(
                id=stable_id(server, Cause.idle_in_transaction, ",".join(sorted(h.tables))),
                cause=Cause.idle_in_transaction,
                family=FAMILY,
                subject=h.ident,
                score=round(max(0.4, score_waits), 3),
                summary=f"{h.ident} idle in transaction for {h.age_s or 0:,.0f} s holds {h.locks} lock(s) on "
                f"{', '.join(h.tables)}",
                evidence=[h.describe(), sampled],
                remedies=[_release(h)],
                source=MANUAL_LOCKS,
                tables=h.tables,
            )
        )
    if not roots and not idle:
        out.ruled_out.append(
            RuledOut(
                cause=Cause.lock_chain,
                reason=(sampled if samples else "no lock samples in the window")
                + f"; no idle-in-transaction session older than {t('holder_age_s'):g} s holds locks",
            )
        )


def _cancel(pid: int) -> Remedy:
    return Remedy(
        sql=f"SELECT pg_cancel_backend({pid})",
        automatic=False,
        lock_impact="cancels the running statement (its transaction fails); the waiters proceed",
    )


def link_chains(out: RootCauses) -> None:
    """A lock chain whose root runs a statement on a table with stale statistics or a missing index is
    caused by that finding (DBA-Bench's chain: stale statistics → slow transaction → lock waits); vacuum
    held back by a session that is itself a lock-chain or idle-in-transaction finding is caused by it."""
    holders = {f.subject: f for f in out.findings if f.cause in (Cause.idle_in_transaction, Cause.lock_chain)}
    for f in out.findings:
        if f.cause == Cause.vacuum_held_back:
            pid = next((p for p in holders if f"{p} " in f.summary or f.summary.endswith(p)), None)
            if pid is not None:
                f.caused_by = holders[pid].id
    upstream = [f for f in out.findings if f.cause in (Cause.stale_statistics, Cause.missing_index)]
    for f in out.findings:
        if f.cause != Cause.lock_chain:
            continue
        text = " ".join(f.evidence).lower()
        for u in upstream:
            if any(f" {tab.split('.')[-1].lower()}" in text for tab in u.tables):
                f.caused_by = u.id
                f.evidence.append(f"its statement reads {u.subject}: {u.summary}")
                break
