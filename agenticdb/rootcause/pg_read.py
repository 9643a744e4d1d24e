"""What the PostgreSQL detectors read: table counters, sessions holding the xmin horizon or locks, lock
waits sampled over a window, and plans of the benchmark's own statements (PostgreSQL 15 views).

Sources (PostgreSQL 15 manual): 28.2.18 pg_stat_all_tables (n_mod_since_analyze, n_dead_tup, seq_scan,
seq_tup_read, idx_tup_fetch), 28.2.3 pg_stat_activity (backend_xmin, xact_start, state), 54.12 pg_locks
and 9.26 pg_blocking_pids(), 54.19 pg_replication_slots, 54.17 pg_prepared_xacts, F.32
pg_stat_statements, 14.1 EXPLAIN (ANALYZE: "Plan Rows" against "Actual Rows" per loop).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from agenticdb.rootcause.watch import Watch
from agenticdb.units.text import clip

TABLES_SQL = """
SELECT s.schemaname || '.' || s.relname, c.reltuples::float8, s.n_live_tup, s.n_dead_tup,
       s.n_mod_since_analyze, coalesce(s.seq_scan, 0), coalesce(s.seq_tup_read, 0), coalesce(s.idx_scan, 0),
       coalesce(s.idx_tup_fetch, 0), (s.last_analyze IS NOT NULL OR s.last_autoanalyze IS NOT NULL),
       coalesce(c.reloptions, '{}'), pg_total_relation_size(c.oid), s.relname
FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
"""

SETTINGS = (
    "autovacuum",
    "autovacuum_analyze_threshold",
    "autovacuum_analyze_scale_factor",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_scale_factor",
)

HOLDERS_SQL = """
SELECT a.pid, coalesce(a.state, ''), extract(epoch FROM now() - a.xact_start)::float8,
       extract(epoch FROM now() - a.state_change)::float8, left(coalesce(a.query, ''), 300),
       greatest(age(a.backend_xmin), age(a.backend_xid)), a.backend_type
FROM pg_stat_activity a
WHERE a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL
  AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
  AND a.backend_type NOT IN ('autovacuum worker', 'walsender')
ORDER BY a.xact_start
"""

LOCKED_SQL = """
SELECT l.pid, array_agg(DISTINCT n.nspname || '.' || c.relname) FILTER (WHERE c.relkind = 'r'), count(*)
FROM pg_locks l LEFT JOIN pg_class c ON c.oid = l.relation LEFT JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE l.granted AND l.pid <> pg_backend_pid()
GROUP BY l.pid
"""

SLOTS_SQL = """
SELECT slot_name, greatest(age(xmin), age(catalog_xmin)), active FROM pg_replication_slots
WHERE xmin IS NOT NULL OR catalog_xmin IS NOT NULL
"""

PREPARED_SQL = "SELECT gid, age(transaction), extract(epoch FROM now() - prepared)::float8 FROM pg_prepared_xacts"

WAITS_SQL = """
SELECT pid, pg_blocking_pids(pid), coalesce(wait_event_type, ''), left(coalesce(query, ''), 200)
FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND cardinality(pg_blocking_pids(pid)) > 0
"""

SESSION_SQL = """
SELECT pid, coalesce(state, ''), extract(epoch FROM now() - coalesce(xact_start, backend_start))::float8,
       left(coalesce(query, ''), 300)
FROM pg_stat_activity WHERE pid = ANY(%s)
"""

PGSS_SQL = """
SELECT left(query, 2000), calls, total_exec_time FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY total_exec_time DESC LIMIT 20
"""


@dataclass(frozen=True)
class TableStats:
    """pg_stat_user_tables + pg_class of one table (``name``: schema.table; counters cumulative)."""

    name: str
    reltuples: float
    n_live: int
    n_dead: int
    n_mod: int
    seq_scan: int
    seq_tup_read: int
    idx_scan: int
    idx_tup_fetch: int
    analyzed: bool
    reloptions: tuple[str, ...]
    size_bytes: int
    relname: str

    @property
    def autovacuum_enabled(self) -> bool:
        """False when the table's storage parameter ``autovacuum_enabled`` is off."""
        return not any(o.lower() in ("autovacuum_enabled=false", "autovacuum_enabled=off") for o in self.reloptions)

    @property
    def rows(self) -> float:
        """Rows as the counters know them: reltuples (−1 = never analyzed on PG14+), else n_live_tup."""
        return self.reltuples if self.reltuples >= 0 else float(self.n_live)


@dataclass
class Snapshot:
    """Table counters and the autovacuum settings at one moment (``at``: time.monotonic())."""

    tables: dict[str, TableStats]
    settings: dict[str, str]
    at: float


def connect(dsn: str, database: str | None) -> psycopg.Connection[Any]:
    """An autocommit connection to ``database`` (the tables' database) with the server's ``dsn``."""
    conninfo = psycopg.conninfo.make_conninfo(dsn, dbname=database) if database else dsn
    return psycopg.connect(conninfo, autocommit=True, connect_timeout=5)


def current_database(conn: psycopg.Connection[Any]) -> str:
    """The database ``conn`` is connected to (the one its table statistics describe)."""
    row = conn.execute("SELECT current_database()").fetchone()
    return str(row[0]) if row else ""


def first_row(dsn: str, database: str | None, query: str) -> dict[str, Any] | None:
    """The first row of a read-only ``query`` run in ``database`` (None: the DSN's), by column name, plus
    ``database``: the one it ran in; None when it returns no row.

    Raises:
        psycopg.Error: the server does not connect or the query fails.
    """
    with connect(dsn, database) as conn:
        conn.execute("SET default_transaction_read_only = on")  # evidence only: the query may change nothing
        cur = conn.execute(query)
        row = cur.fetchone()
        if row is None or cur.description is None:
            return None
        out = {d.name: v for d, v in zip(cur.description, row, strict=True)}
        return {"database": current_database(conn), **out}


def snapshot(conn: psycopg.Connection[Any]) -> Snapshot:
    """The table counters and autovacuum settings now."""
    tables = {}
    for r in conn.execute(TABLES_SQL).fetchall():
        n = [int(x or 0) for x in r[2:9]]
        ts = TableStats(
            str(r[0]),
            float(r[1]),
            n[0],
            n[1],
            n[2],
            n[3],
            n[4],
            n[5],
            n[6],
            bool(r[9]),
            tuple(r[10]),
            int(r[11]),
            r[12],
        )
        tables[ts.name] = ts
    rows = conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", (list(SETTINGS),)).fetchall()
    return Snapshot(tables, {n: str(v) for n, v in rows}, time.monotonic())


@dataclass
class Holder:
    """A session, replication slot or prepared transaction holding the xmin horizon (or locks)."""

    kind: str  # "session" | "slot" | "prepared"
    ident: str
    state: str
    age_s: float | None
    xid_age: int
    query: str = ""
    tables: list[str] = field(default_factory=list)
    locks: int = 0

    def describe(self) -> str:
        """One line: what it is, its state, age and statement."""
        age = f" for {self.age_s:,.0f} s" if self.age_s is not None else ""
        q = f", last statement {clip(self.query, 120)!r}" if self.query else ""
        held = f", holding {self.locks} lock(s) on {', '.join(self.tables)}" if self.tables else ""
        return f"{self.kind} {self.ident} {self.state}{age} (xmin age {self.xid_age:,} xids){held}{q}"


def holders(conn: psycopg.Connection[Any]) -> list[Holder]:
    """Sessions with an open transaction holding an xmin/xid, replication slots and prepared transactions
    that hold the xmin horizon; oldest first."""
    locks = {int(pid): (list(tabs or []), int(n)) for pid, tabs, n in conn.execute(LOCKED_SQL).fetchall()}
    out = []
    for pid, state, xact_s, _state_s, query, xid_age, _btype in conn.execute(HOLDERS_SQL).fetchall():
        tabs, n = locks.get(int(pid), ([], 0))
        out.append(Holder("session", f"pid {pid}", state, float(xact_s or 0), int(xid_age or 0), query, tabs, n))
    for name, xid_age, active in conn.execute(SLOTS_SQL).fetchall():
        out.append(Holder("slot", repr(name), "active" if active else "inactive", None, int(xid_age or 0)))
    for gid, xid_age, age_s in conn.execute(PREPARED_SQL).fetchall():
        out.append(Holder("prepared", repr(gid), "prepared", float(age_s or 0), int(xid_age or 0)))
    return sorted(out, key=lambda h: -h.xid_age)


@dataclass
class LockSample:
    """One look at pg_blocking_pids(): waiting pids and the root holders they wait behind."""

    waiters: int
    roots: dict[int, tuple[str, float, str]]  # pid → (state, age s, statement)
    waiter_queries: list[str]


def lock_sample(conn: psycopg.Connection[Any]) -> LockSample:
    """Who waits on whom now; a root is a blocker that waits on nobody."""
    rows = conn.execute(WAITS_SQL).fetchall()
    blocked = {int(r[0]) for r in rows}
    blockers = {int(b) for r in rows for b in r[1]}
    roots = sorted(blockers - blocked)
    info: dict[int, tuple[str, float, str]] = {}
    if roots:
        for pid, state, age, q in conn.execute(SESSION_SQL, (roots,)).fetchall():
            info[int(pid)] = (state, float(age or 0), q)
    return LockSample(len(blocked), info, [r[3] for r in rows][:5])


PgWatch = Watch[psycopg.Connection[Any], Snapshot, LockSample]
"""A PostgreSQL window: ``before`` is a :class:`Snapshot`, ``samples`` are :class:`LockSample`."""


def watch(dsn: str, database: str | None, interval_s: float = 1.0) -> PgWatch:
    """A (not yet started) :class:`~agenticdb.rootcause.watch.Watch` of ``database``: :func:`snapshot`
    before, :func:`lock_sample` every ``interval_s``; ``psycopg.Error`` ends a read."""
    return Watch(lambda: connect(dsn, database), snapshot, lock_sample, psycopg.Error, interval_s)


def top_statements(conn: psycopg.Connection[Any]) -> list[tuple[str, int, float]]:
    """pg_stat_statements' top 20 statements of the connection's database by total execution time
    (normalised text, calls, ms); empty when the view is missing or unreadable."""
    try:
        return [(str(q), int(c), float(t)) for q, c, t in conn.execute(PGSS_SQL).fetchall()]
    except psycopg.Error:
        return []


@dataclass
class PlanEvidence:
    """Worst row misestimate per table and sequential-scan filters seen in the statements' plans."""

    error: dict[str, tuple[float, float, float, str]] = field(default_factory=dict)  # table → (factor, est, act, stmt)
    seq_filters: dict[str, set[str]] = field(default_factory=dict)  # relname → predicate columns
    seq_kept: dict[str, dict[str, float]] = field(default_factory=dict)
    """relname → predicate column → the smallest share of the rows a Seq Scan Filter naming it kept, over the
    statements explained: "Actual Rows" / ("Actual Rows" + "Rows Removed by Filter"), both per loop (manual
    14.1 EXPLAIN ANALYZE). The share is the whole filter's: with several columns ANDed, each column alone
    keeps at least that share."""
    seq_joins: dict[str, set[str]] = field(default_factory=dict)
    """relname → its columns in the join conditions (Hash Cond, Merge Cond, Join Filter) of a join over a
    Seq Scan of it, qualified by the scan's alias: the predicate an index could serve in a nested loop."""
    seq_participants: dict[str, int] = field(default_factory=dict)
    """relname → the most processes that shared one parallel Seq Scan of it: "Workers Launched" of the Gather
    (Merge) above + 1 for the leader (manual 15.3 "Parallel Plans", parallel_leader_participation). Each
    participant counts one scan in pg_stat_user_tables.seq_scan and reads its part of the table."""
    problems: list[str] = field(default_factory=list)
    explained: int = 0


def _walk(node: dict[str, Any], stmt: str, ev: PlanEvidence, launched: int = 0) -> None:
    if node.get("Node Type") in ("Gather", "Gather Merge"):
        launched = int(node.get("Workers Launched", 0) or 0)
    rel = node.get("Relation Name")
    if rel and node.get("Node Type") == "Seq Scan" and node.get("Parallel Aware") and launched:
        ev.seq_participants[rel] = max(ev.seq_participants.get(rel, 1), launched + 1)
    est, act = float(node.get("Plan Rows", 0) or 0), node.get("Actual Rows")
    if rel and act is not None and node.get("Actual Loops", 1):
        factor = max(float(act), 1.0) / max(est, 1.0)
        factor = max(factor, 1.0 / factor)
        if factor > ev.error.get(rel, (0.0, 0.0, 0.0, ""))[0]:
            ev.error[rel] = (factor, est, float(act), stmt)
    if rel and node.get("Node Type") == "Seq Scan" and node.get("Filter"):
        cols = predicate_columns(str(node["Filter"]))
        ev.seq_filters.setdefault(rel, set()).update(cols)
        removed = node.get("Rows Removed by Filter")
        seen = float(act or 0) + float(removed or 0)
        if act is not None and removed is not None and seen > 0:  # 0: never executed (Actual Loops 0)
            kept = ev.seq_kept.setdefault(rel, {})
            for c in cols:
                kept[c] = min(kept.get(c, 1.0), float(act) / seen)
    conds = " ".join(str(node[k]) for k in ("Hash Cond", "Merge Cond", "Join Filter") if node.get(k))
    if conds:
        refs = {(q.lower(), c.lower()) for q, c in _QUALIFIED.findall(conds)}
        for scan in _seq_scans(node):
            alias = str(scan.get("Alias") or scan["Relation Name"]).lower()
            cols = {c for q, c in refs if q == alias}
            if cols:
                ev.seq_joins.setdefault(str(scan["Relation Name"]), set()).update(cols)
    for child in node.get("Plans", []) or []:
        _walk(child, stmt, ev, launched)


_QUALIFIED = re.compile(r"\b([a-z_][a-z0-9_$]*)\.\"?([a-z_][a-z0-9_$]*)\"?", re.I)


def _seq_scans(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The Seq Scan nodes below ``node`` (its join's inputs, through Hash, Sort, Materialize…)."""
    out: list[dict[str, Any]] = []
    for child in node.get("Plans", []) or []:
        if child.get("Node Type") == "Seq Scan" and child.get("Relation Name"):
            out.append(child)
        out += _seq_scans(child)
    return out


_PRED = re.compile(r"(?:\b\w+\.)?\"?([a-z_][a-z0-9_]*)\"?\s*(<>|!=|<=|>=|=\s*any\b|=|<|>|\bbetween\b|\bin\b|~~)", re.I)
_NOT_COLUMNS = {"and", "or", "not", "select", "where", "from", "limit", "by", "on", "then", "else", "case", "when"}


def predicate_operators(text: str) -> dict[str, set[str]]:
    """Column name → the comparison operators it meets in a filter or WHERE text (``(customer = 42)``,
    ``c.status = $1``, ``k != $2``); ``= ANY`` is reported as ``in``, ``!=`` as ``<>``."""
    out: dict[str, set[str]] = {}
    for m in _PRED.finditer(text):
        col, op = m.group(1).lower(), re.sub(r"\s+", " ", m.group(2).lower())
        if col in _NOT_COLUMNS:
            continue
        op = {"!=": "<>", "= any": "in"}.get(op, op)
        out.setdefault(col, set()).add(op)
    return out


def predicate_columns(text: str) -> set[str]:
    """Column names compared in a filter or WHERE text (``(customer = 42)``, ``c.status = $1``)."""
    return set(predicate_operators(text))


_CMP = re.compile(
    r"(?<![\w.$\"])(?:\"?([a-z_][a-z0-9_$]*)\"?\.)?\"?([a-z_][a-z0-9_$]*)\"?\s*"
    r"(<>|!=|<=|>=|=\s*any\b|=|<|>|\bbetween\b|\bin\b|\blike\b|~~)",
    re.I,
)
_CMP_RIGHT = re.compile(
    r"(<>|!=|<=|>=|=|<|>)\s*(?:\"?([a-z_][a-z0-9_$]*)\"?\.)?\"?([a-z_][a-z0-9_$]*)\"?(?![\w.$\"]|\s*\()", re.I
)
_MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "<>"}
_FROM_END = re.compile(r"\b(?:where|group|order|limit|offset|having|union|except|intersect|window|for)\b|[();]")
_FROM_SPLIT = re.compile(r",|\b(?:natural\s+)?(?:(?:left|right|full)\s+(?:outer\s+)?|inner\s+|cross\s+)?join\b")
_NOT_ALIAS = {"on", "using", "lateral", "tablesample", "natural", "left", "right", "full", "inner", "cross", "join"}


def statement_relations(text: str) -> dict[str, str]:
    """Name or alias → table name (unqualified, lower case) of every ``FROM x [AS] a`` / ``JOIN x [AS] a`` /
    ``FROM x a, y b`` of a statement text, subqueries' too. A simple reading of the FROM clause (PostgreSQL
    15 manual, SELECT: from_item), not a parser: a subquery in FROM is skipped (its own FROM is read)."""
    low = text.lower()
    out: dict[str, str] = {}
    for m in re.finditer(r"\bfrom\b", low):
        region = _FROM_END.split(low[m.end() :], maxsplit=1)[0]
        for piece in _FROM_SPLIT.split(region):
            words = re.split(r"\b(?:on|using)\b", piece, maxsplit=1)[0].split()
            if not words or words[0] in _NOT_ALIAS:
                continue
            table = words[0].split(".")[-1].strip('"')
            out[table] = table
            rest = [w for w in words[1:] if w != "as"]
            if rest and rest[0].strip('"') not in _NOT_ALIAS:
                out[rest[0].strip('"')] = table
    return out


def statement_predicates(text: str, relname: str, columns: set[str]) -> dict[str, set[str]]:
    """Column of table ``relname`` → the comparison operators it meets in the WHERE and JOIN … ON
    conditions of a statement text (e.g. pg_stat_statements' normalised text), either side of the operator.
    A column counts only when it is qualified by that table's name or alias in the statement, or unqualified
    in a statement that reads that one table only, and when it is one of ``columns`` (the table's own):
    ``t.tid`` of ``pgbench_tellers t`` is never a column of ``pgbench_accounts a``. ``= ANY`` is reported as
    ``in``, ``!=`` as ``<>``; a right-hand column gets the mirrored operator (``x < t.y`` → ``y >``)."""
    low = text.lower()
    rels = statement_relations(low)
    rel = relname.lower()
    if rel not in rels.values():
        return {}
    only = set(rels.values()) == {rel}
    start = re.search(r"\b(?:on|where)\b", low)
    if start is None:
        return {}
    conds = low[start.start() :]
    found: list[tuple[str | None, str, str]] = [(q or None, c, o) for q, c, o in _CMP.findall(conds)]
    found += [(q or None, c, _MIRROR.get(o, o)) for o, q, c in _CMP_RIGHT.findall(conds)]
    out: dict[str, set[str]] = {}
    for q, col, op in found:
        mine = rels.get(q) == rel if q is not None else only
        if not mine or col not in columns:
            continue
        op = {"!=": "<>", "= any": "in", "like": "~~"}.get(re.sub(r"\s+", " ", op), re.sub(r"\s+", " ", op))
        out.setdefault(col, set()).add(op)
    return out


def table_columns(conn: psycopg.Connection[Any], table: str) -> set[str]:
    """The column names (lower case) of ``table`` (schema.table), from pg_attribute (manual 53.7)."""
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
        (table,),
    ).fetchall()
    return {str(r[0]).lower() for r in rows}


STATS_SQL = """
SELECT null_frac::float8, n_distinct::float8, most_common_freqs::float8[] FROM pg_stats
WHERE schemaname = %s AND tablename = %s AND attname = %s ORDER BY inherited LIMIT 1
"""


def equality_share(conn: psycopg.Connection[Any], table: str, column: str, rows: float) -> tuple[float, float] | None:
    """(share of the rows ``column = <a constant not known in advance>`` keeps, null_frac) of ``table``
    (schema.table), estimated from pg_stats as the planner does for such a comparison (PostgreSQL 15 source,
    selfuncs.c var_eq_non_const): (1 − null_frac) / the number of distinct values, never more than the most
    common value's frequency; ``<>`` keeps 1 − that − null_frac there. n_distinct < 0 is minus a fraction of
    ``rows`` (manual, System Views: pg_stats). None when the column has no statistics (never analyzed, or not
    readable by the role). An estimate: the real constants may be commoner or rarer than the average value."""
    schema, _, rel = table.partition(".")
    try:
        row = conn.execute(STATS_SQL, (schema, rel, column)).fetchone()
    except psycopg.Error:
        return None
    if row is None:
        return None
    null_frac, n_distinct, freqs = float(row[0] or 0.0), float(row[1] or 0.0), list(row[2] or [])
    distinct = -n_distinct * rows if n_distinct < 0 else n_distinct
    share = (1.0 - null_frac) / distinct if distinct > 1 else 1.0 - null_frac
    if freqs:
        share = min(share, float(freqs[0]))
    return share, null_frac


def explain_statements(conn: psycopg.Connection[Any], statements: list[str], timeout_s: float) -> PlanEvidence:
    """``EXPLAIN (ANALYZE, FORMAT JSON)`` of each SELECT in ``statements`` inside a transaction that is
    rolled back, with ``statement_timeout``; ``{r}`` placeholders (the scenario query driver's) become 1.
    Statements that are not SELECTs are skipped (ANALYZE executes them)."""
    ev = PlanEvidence()
    for raw in statements:
        stmt = raw.replace("{r}", "1").strip().rstrip(";")
        if not stmt.lower().startswith(("select", "with")):
            ev.problems.append(f"not explained (not a SELECT): {clip(stmt, 80)!r}")
            continue
        try:
            with conn.transaction(force_rollback=True):
                conn.execute(f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}")
                row = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {stmt}").fetchone()
        except psycopg.errors.QueryCanceled:
            ev.problems.append(f"EXPLAIN ANALYZE exceeded {timeout_s:g} s: {clip(stmt, 80)!r}")
            continue
        except psycopg.errors.InsufficientPrivilege as exc:
            # EXPLAIN ANALYZE runs the statement as the tuning role, which owns none of the application's
            # tables (setup-role grants none): a DBA read "no benchmark statements to EXPLAIN" and could not
            # tell why the plan evidence was missing
            role = conn.info.user
            ev.problems.append(
                f"EXPLAIN failed ({clip(exc, 80)}): {clip(stmt, 80)!r}; EXPLAIN ANALYZE runs it as the "
                f"tuning role {role}, which needs SELECT on its tables (GRANT SELECT ON … TO {role})"
            )
            continue
        except psycopg.Error as exc:
            ev.problems.append(f"EXPLAIN failed ({clip(exc, 80)}): {clip(stmt, 80)!r}")
            continue
        assert row is not None
        plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
        _walk(plan[0]["Plan"], clip(stmt, 120), ev)
        ev.explained += 1
    return ev


def plan_of(conn: psycopg.Connection[Any], statement: str) -> str:
    """The plain ``EXPLAIN`` of ``statement`` (``{r}`` → 1) as one text: plan before/after a remedy."""
    stmt = statement.replace("{r}", "1").strip().rstrip(";")
    rows = conn.execute(f"EXPLAIN {stmt}").fetchall()
    return "\n".join(str(r[0]) for r in rows)


def indexed_leading_columns(conn: psycopg.Connection[Any], table: str) -> dict[str, str]:
    """Leading column → index name of every valid index of ``table`` (schema.table)."""
    rows = conn.execute(
        """SELECT a.attname, i.indexrelid::regclass::text FROM pg_index i
           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
           WHERE i.indrelid = %s::regclass AND i.indisvalid""",
        (table,),
    ).fetchall()
    return {str(c).lower(): str(n) for c, n in rows}
