"""MariaDB root-cause detectors: statements without index use, purge lag, InnoDB lock waits and their
holder, stale table statistics (issue 40). Thresholds: ``catalogs/causes.toml``; reads: ``my_read``."""

from __future__ import annotations

import re

import pymysql
import structlog

from agenticdb.dialect import parse_mysql_dsn
from agenticdb.rootcause import my_read as rd
from agenticdb.rootcause.model import Cause, Finding, Remedy, RootCauses, RuledOut, ramp, stable_id, t
from agenticdb.units.text import clip

log = structlog.get_logger(__name__)

FAMILY = "mariadb"
KB_STATS = "MariaDB KB 'InnoDB Persistent Statistics' and 'ANALYZE TABLE'"
KB_INDEX = (
    "MariaDB KB 'Performance Schema events_statements_summary_by_digest' and "
    "'InnoDB Online DDL Operations with ALGORITHM=INPLACE'"
)
KB_PURGE = "MariaDB KB 'InnoDB Purge' (history list length) and 'Information Schema INNODB_TRX Table'"
KB_LOCKS = "MariaDB KB 'Information Schema INNODB_LOCK_WAITS Table' and 'KILL'"

_FROM = re.compile(r"\bfrom\s+`?(\w+)`?(?:\s*\.\s*`?(\w+)`?)?", re.I)
_WHERE_COL = re.compile(r"`?(\w+)`?\s*(?:=|<=|>=|<|>|\bbetween\b|\bin\b)", re.I)


def _kill(trx: rd.Trx) -> Remedy:
    return Remedy(
        sql=f"KILL {trx.thread}",
        automatic=False,
        lock_impact="destructive: the connection's open transaction is rolled back and its client disconnected; "
        "fix the application (or lower wait_timeout/idle_transaction_timeout for it)",
    )


def _window(before: rd.Snapshot | None, after: rd.Snapshot) -> str:
    return f"over the {after.at - before.at:.0f}-s window" if before is not None else "cumulative since start"


def no_index_statements(
    conn: pymysql.connections.Connection, before: rd.Snapshot | None, after: rd.Snapshot, server: str, out: RootCauses
) -> None:
    """Digests that (almost) never use an index, examine many rows per call and take most of the
    statement time of the window; an index already leading with the predicate column rules it out."""
    if after.settings.get("performance_schema", "OFF").upper() != "ON" or not after.digests:
        out.ruled_out.append(
            RuledOut(cause=Cause.missing_index, reason="not checked: performance_schema is OFF (no statement digests)")
        )
        return
    label = _window(before, after)

    def d(key: str, attr: str) -> int:
        now = int(getattr(after.digests[key], attr))
        prev = before.digests.get(key) if before is not None else None
        return max(0, now - int(getattr(prev, attr))) if prev is not None else now

    total = sum(d(k, "timer_ps") for k, dig in after.digests.items() if not rd.is_monitoring(dig.text)) or 1
    hits = []
    for key, dig in after.digests.items():
        calls = d(key, "count")
        dml = dig.text.lower().lstrip().startswith(("select", "update", "delete"))
        if calls == 0 or not dml or rd.is_monitoring(dig.text):
            continue
        share_noidx = d(key, "no_index") / calls
        per_call = d(key, "rows_examined") / calls
        tshare = d(key, "timer_ps") / total
        if share_noidx >= t("mdb_no_index_share") and per_call >= t("min_table_rows"):
            hits.append((tshare, key, dig, calls, share_noidx, per_call))
    if not hits:
        out.ruled_out.append(
            RuledOut(
                cause=Cause.missing_index,
                reason=f"no statement digest with ≥ {t('mdb_no_index_share'):.0%} of executions without an index "
                f"and ≥ {t('min_table_rows'):,.0f} rows examined per call ({label})",
            )
        )
        return
    for tshare, _key, dig, calls, share_noidx, per_call in sorted(hits, key=lambda h: h[0], reverse=True)[:3]:
        m = _FROM.search(dig.text)
        schema, table = (m.group(1), m.group(2)) if m and m.group(2) else (dig.schema, m.group(1) if m else "")
        table = rd.real_table_name(conn, schema, table) if table else table
        where = dig.text.lower().split(" where ", 1)[1] if " where " in dig.text.lower() else ""
        cols = [c.lower() for c in _WHERE_COL.findall(where) if c.lower() not in ("and", "or", "not")]
        indexed = rd.leading_index_columns(conn, schema, table) if table else {}
        covered = [c for c in cols if c in indexed]
        if covered:
            out.ruled_out.append(
                RuledOut(
                    cause=Cause.missing_index,
                    reason=f"{schema}.{table}: statement {clip(dig.text, 80)!r} runs without an index although "
                    f"{indexed[covered[0]]} leads with {covered[0]}: optimizer settings (a knob) or a non-selective "
                    "predicate",
                )
            )
            continue
        col = cols[0] if cols else None
        remedies = []
        if col and table:
            idx = f"{table}_{col}_idx"[:64]
            remedies.append(
                Remedy(
                    sql=f"ALTER TABLE `{schema}`.`{table}` ADD INDEX `{idx}` (`{col}`), ALGORITHM=INPLACE, LOCK=NONE",
                    automatic=True,
                    lock_impact="online: reads and writes continue (LOCK=NONE); a brief metadata lock at start and "
                    "end waits for open transactions on the table",
                    verify="the digest's SUM_NO_INDEX_USED stops growing and EXPLAIN shows the index",
                    table=f"{schema}.{table}",
                )
            )
        out.findings.append(
            Finding(
                id=stable_id(server, Cause.missing_index, schema, table, col or ""),
                cause=Cause.missing_index,
                family=FAMILY,
                subject=f"{schema}.{table}({col})" if col else f"{schema}.{table}",
                score=round(ramp(tshare, 0.3, t("seq_read_share_certain")) * (1.0 if col else 0.5), 3),
                summary=f"missing index: {schema}.{table} scanned without an index"
                + (f", filtering on {col}" if col else ""),
                evidence=[
                    f"digest {clip(dig.text, 120)!r}: {calls:,} calls, {share_noidx:.0%} without an index, "
                    f"{per_call:,.0f} rows examined per call, {tshare:.0%} of statement time {label} "
                    "(performance_schema.events_statements_summary_by_digest)",
                    f"no index of {schema}.{table} leads with {col}" if col else "no predicate column in the digest",
                ],
                remedies=remedies,
                source=KB_INDEX,
                tables=[f"{schema}.{table}", table],
            )
        )


def stale_statistics(
    after: rd.Snapshot, server: str, out: RootCauses, plans: dict[str, tuple[float, float, float, str]] | None = None
) -> None:
    """Tables whose rows changed beyond the 10 % auto-recalculation share since their statistics were
    taken, with recalculation off for them (or globally); like on PostgreSQL, the counters alone make a
    suspect (× 0.5, judgement) and a row misestimate of the workload's statements (``plans``: table →
    worst factor under ANALYZE FORMAT=JSON) makes it certain."""
    global_off = after.settings.get("innodb_stats_auto_recalc", "ON").upper() in ("OFF", "0")
    share_min, certain = t("mdb_recalc_share"), t("stale_share_certain")
    for ts in after.tables.values():
        rows = max(ts.rows, 1)
        share = ts.modified / rows
        if max(ts.rows, ts.modified) < t("min_table_rows") or share <= share_min:
            continue
        off = global_off or ts.auto_recalc_off
        schema, _, table = ts.name.partition("/")
        err = (plans or {}).get(table)
        score = ramp(share, share_min, certain) * 0.5
        plan_line = "plan evidence: none (no statements analysed; INNODB_SYS_TABLESTATS counters only)"
        if err is not None:
            score = max(score, ramp(err[0], 2.0, t("estimate_error_certain")))
            plan_line = (
                f"plan evidence (ANALYZE FORMAT=JSON of the benchmark's statements): rows estimated {err[1]:,.0f}, "
                f"read {err[2]:,.0f} ({err[0]:,.1f}×) on {table} in {err[3]!r}"
            )
        score *= 1.0 if off else 0.5
        out.findings.append(
            Finding(
                id=stable_id(server, Cause.stale_statistics, ts.name),
                cause=Cause.stale_statistics,
                family=FAMILY,
                subject=f"{schema}.{table}",
                score=round(score, 3),
                summary=f"stale statistics on {schema}.{table}: {share:.0%} of its rows changed since they were taken",
                evidence=[
                    f"{schema}.{table}: MODIFIED_COUNTER {ts.modified:,} of NUM_ROWS {ts.rows:,} ({share:.0%}) > "
                    f"{share_min:.0%} (INNODB_SYS_TABLESTATS)",
                    "recalculation off: " + ("innodb_stats_auto_recalc = OFF" if global_off else "STATS_AUTO_RECALC=0")
                    if off
                    else "innodb_stats_auto_recalc will recalculate them in the background",
                    plan_line,
                ],
                remedies=[
                    Remedy(
                        sql=f"ANALYZE TABLE `{schema}`.`{table}`",
                        automatic=True,
                        lock_impact="reads and writes continue; samples innodb_stats_persistent_sample_pages pages",
                        verify="EXPLAIN's row estimates for the statements on the table come close",
                        table=f"{schema}.{table}",
                    )
                ],
                source=KB_STATS,
                tables=[f"{schema}.{table}", table],
            )
        )
    if not any(f.cause == Cause.stale_statistics for f in out.findings):
        out.ruled_out.append(
            RuledOut(
                cause=Cause.stale_statistics,
                reason=f"no table of ≥ {t('min_table_rows'):,.0f} rows with more than {share_min:.0%} of its rows "
                "modified since its statistics (INNODB_SYS_TABLESTATS)",
            )
        )


def purge_lag(history: int | None, trx: list[rd.Trx], server: str, out: RootCauses) -> None:
    """A history list length beyond the threshold while an old transaction keeps purge from advancing."""
    certain = t("mdb_history_certain")
    old = [x for x in trx if x.age_s >= t("holder_age_s")]
    if history is None:
        out.ruled_out.append(
            RuledOut(cause=Cause.purge_lag, reason="trx_rseg_history_len is disabled (INNODB_METRICS)")
        )
        return
    if history < certain / 10 or not old:
        who = f"oldest transaction: {old[0].describe()}" if old else f"no transaction open ≥ {t('holder_age_s'):g} s"
        out.ruled_out.append(RuledOut(cause=Cause.purge_lag, reason=f"history list length {history:,}; {who}"))
        return
    h = old[0]
    out.findings.append(
        Finding(
            id=stable_id(server, Cause.purge_lag, "oldest-trx"),
            cause=Cause.purge_lag,
            family=FAMILY,
            subject=f"thread {h.thread}",
            score=round(ramp(history, certain / 10, certain), 3),
            summary=f"purge held back: history list {history:,} undo records behind thread {h.thread}'s transaction",
            evidence=[
                f"trx_rseg_history_len = {history:,} (INNODB_METRICS), certain from {certain:,.0f}",
                f"oldest transaction: {h.describe()} (INNODB_TRX, PROCESSLIST)",
            ],
            remedies=[_kill(h)],
            source=KB_PURGE,
        )
    )


def lock_waits(samples: list[rd.LockSample], trx: list[rd.Trx], server: str, out: RootCauses) -> None:
    """InnoDB lock waits sampled during the window and the root blocker; an idle ("Sleep") transaction
    holding row locks counts even when nobody waits now."""
    old_age = t("holder_age_s")  # short holders: the workload's own hot-row contention, not a stuck one
    waited = [s for s in samples if s.waiters and any(r.age_s >= old_age for r in s.roots.values())]
    share = len(waited) / len(samples) if samples else 0.0
    score = ramp(share, 0.1, t("lock_wait_share_certain"))
    sampled = (
        f"{len(waited)} of {len(samples)} lock samples (INNODB_LOCK_WAITS, ~1 s apart) had waiters behind a "
        f"transaction older than {old_age:g} s"
    )
    roots: dict[str, rd.Trx] = {}
    for s in waited:
        roots.update({k: r for k, r in s.roots.items() if r.age_s >= old_age})
    mean = sum(s.waiters for s in waited) / len(waited) if waited else 0.0
    for r in roots.values():
        idle = r.command == "Sleep"
        cause = Cause.idle_in_transaction if idle else Cause.lock_chain
        out.findings.append(
            Finding(
                id=stable_id(server, cause, "root", r.query[:60] if not idle else "idle"),
                cause=cause,
                family=FAMILY,
                subject=f"thread {r.thread}",
                score=round(score, 3),
                summary=f"lock chain: thread {r.thread} "
                + ("idle in transaction" if idle else "running")
                + f" for {r.age_s:,.0f} s holds {r.rows_locked:,} row lock(s); "
                + f"{mean:.1f} transaction(s) wait behind it",
                evidence=[sampled, f"root blocker {r.describe()}"],
                remedies=[_kill(r)],
                source=KB_LOCKS,
            )
        )
    seen = {f.subject for f in out.findings}
    for x in trx:
        if (
            x.command == "Sleep"
            and x.rows_locked
            and x.idle_s >= t("holder_age_s")
            and f"thread {x.thread}" not in seen
        ):
            out.findings.append(
                Finding(
                    id=stable_id(server, Cause.idle_in_transaction, "idle"),
                    cause=Cause.idle_in_transaction,
                    family=FAMILY,
                    subject=f"thread {x.thread}",
                    score=round(max(0.4, score), 3),
                    summary=f"thread {x.thread} idle in transaction for {x.idle_s:,.0f} s "
                    f"holds {x.rows_locked:,} row lock(s)",
                    evidence=[x.describe(), sampled],
                    remedies=[_kill(x)],
                    source=KB_LOCKS,
                )
            )
    if not roots and not any(f.cause == Cause.idle_in_transaction for f in out.findings):
        out.ruled_out.append(
            RuledOut(
                cause=Cause.lock_chain,
                reason=(sampled if samples else "no lock samples")
                + f"; no idle transaction holding row locks for ≥ {t('holder_age_s'):g} s",
            )
        )


def detect_mariadb(
    dsn: str, database: str | None, watch: rd.MyWatch | None, statements: list[str], server: str
) -> RootCauses:
    """Every MariaDB detector over the window of ``watch``, connected to ``database`` (None: the DSN's own;
    ``RootCauses.database`` names it; table statistics are that database's, digests, transactions and lock
    waits cover every schema). Never raises: an
    unreadable server gives an empty result with a note. ``statements``: the workload's SELECTs for plan evidence."""
    out = RootCauses(family=FAMILY, database=database or str(parse_mysql_dsn(dsn).get("database") or ""))
    try:
        conn = rd.connect(dsn, database)
        try:
            out.database = rd.current_database(conn)
            after = rd.snapshot(conn)
            before = watch.before if watch is not None else None
            trx = rd.transactions(conn)
            samples = (watch.samples if watch is not None else []) or [rd.lock_sample(conn)]
            errors, problems, done = (
                rd.plan_errors(conn, statements, t("explain_timeout_s")) if statements else ({}, [], 0)
            )
            out.notes.append(
                f"plan evidence: ANALYZE FORMAT=JSON of {done} of {len(statements)} benchmark statement(s)"
                + (f" ({len(problems)} not analysed: {'; '.join(problems)})" if problems else "")
                if statements
                else "plan evidence: none ([rootcause] statements not given); table counters only"
            )
            stale_statistics(after, server, out, errors)
            no_index_statements(conn, before, after, server, out)
            purge_lag(rd.history_length(conn), trx, server, out)
            lock_waits(samples, trx, server, out)
            out.notes.append(f"digests {_window(before, after)}; {len(samples)} lock sample(s)")
        finally:
            conn.close()
    except pymysql.MySQLError as exc:
        out.notes.append(f"root causes not read: {clip(exc, 200)}")
        log.warning("rootcause.unreadable", error=str(exc)[:200], reason="no root-cause evidence this window")
    return out
