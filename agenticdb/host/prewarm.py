"""Loading the workload's relations into PostgreSQL's shared buffers after a restart (issue 36), with pg_prewarm.

After a restart shared_buffers is empty, and a workload of point reads fills it slowly: in a harness run
(sysbench oltp_read_only, 0.81 GiB of data) shared_buffers 128MB → 512MB measured 493.9 TPS/p95 on its first
run after the restart and 862 on the next, so the candidate started with a handicap that was not the knob's
effect. The executor calls :func:`prewarm_database` after every restart it performs (and before the first run
of a server just started), then runs its time warm-up as before.

PostgreSQL 15 manual F.30 pg_prewarm: ``pg_prewarm(regclass, mode text default 'buffer', fork text default
'main', first_block int8 default null, last_block int8 default null) RETURNS int8`` reads the blocks into the
buffer cache (mode ``buffer``) and returns how many it read; prewarming more blocks than fit evicts the first
ones again, so what is loaded is bounded by shared_buffers. The extension is not marked trusted (its control file
has no ``trusted = true``), so CREATE EXTENSION needs a superuser (manual, CREATE EXTENSION); the function itself
is executable by PUBLIC and needs SELECT on each relation. A least-privilege role therefore gets it only when a
superuser created it in the workload's database (``agenticdb sandbox up``, ``agenticdb setup-role``, as for
pg_stat_statements: ``agenticdb.host.pgss``); otherwise the executor says "prewarm not available: …" and
keeps the time warm-up alone.

MariaDB needs nothing of this: InnoDB dumps the most recently used pages of its buffer pool at shutdown
(``innodb_buffer_pool_dump_at_shutdown``, 25 % of them: ``innodb_buffer_pool_dump_pct``) and reloads them in the
background at start-up (``innodb_buffer_pool_load_at_startup``), both ON by default in 10.11 (MariaDB KB,
"InnoDB Buffer Pool": dumping and restoring); agenticdb's sandboxes and the harness leave them on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
import structlog
from psycopg.conninfo import make_conninfo

from agenticdb.host.pgss import error_line

log = structlog.get_logger(__name__)

EXTENSION = "pg_prewarm"
FILL = 0.9
"""Share of shared_buffers the prewarm fills at most: the rest stays free for catalog pages and whatever the
workload reads first (manual F.30: blocks beyond what fits evict the first ones)."""
CHUNK_BLOCKS = 2048
"""Blocks read per pg_prewarm call (16 MiB of 8-KiB blocks): the time bound is checked between calls."""
MIB = 1024 * 1024

# Tables, materialized views and indexes of the workload's schemas (not the catalogs, not TOAST, not temporary
# relations), most used first: block accesses (hits + reads) since the statistics were last reset, from
# pg_statio_user_tables / pg_statio_user_indexes (manual 28.2.25-26); relations never used come last, largest first.
RELATIONS = """
SELECT c.oid::regclass::text, pg_relation_size(c.oid)::bigint,
       coalesce(st.heap_blks_read + st.heap_blks_hit, si.idx_blks_read + si.idx_blks_hit, 0)::float8 AS used
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_statio_user_tables st ON st.relid = c.oid
LEFT JOIN pg_statio_user_indexes si ON si.indexrelid = c.oid
WHERE c.relkind IN ('r', 'm', 'i') AND c.relpersistence <> 't'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%'
  AND pg_relation_size(c.oid) > 0
ORDER BY used DESC, 2 DESC, 1
"""


@dataclass
class Prewarmed:
    """What one prewarm loaded: ``relations`` in the order loaded (a relation loaded in part says so),
    ``bytes_loaded`` (bytes), ``seconds`` (wall time), ``budget_bytes`` (:data:`FILL` × shared_buffers, bytes),
    ``stopped`` (why it ended: "all loaded", "shared_buffers full", "time bound reached"), ``skipped``
    (relation → the server's error, e.g. no SELECT privilege), and ``unavailable``: why nothing could be loaded
    ("" when the prewarm ran)."""

    relations: list[str] = field(default_factory=list)
    bytes_loaded: int = 0
    seconds: float = 0.0
    budget_bytes: int = 0
    stopped: str = ""
    skipped: dict[str, str] = field(default_factory=dict)
    unavailable: str = ""

    @property
    def mib(self) -> float:
        """MiB loaded."""
        return round(self.bytes_loaded / MIB, 1)

    def note(self) -> str:
        """One line for the measurement and the journal (``Measurement.prewarm``)."""
        if self.unavailable:
            return f"prewarm not available: {self.unavailable}; time warm-up only"
        text = f"pg_prewarm: {len(self.relations)} relations, {self.mib} MiB in {self.seconds:.1f} s ({self.stopped})"
        return text + (f"; {len(self.skipped)} skipped: {next(iter(self.skipped.values()))}" if self.skipped else "")


def loaded(note: str | None) -> bool:
    """Whether a measurement's prewarm note (``Measurement.prewarm``, :meth:`Prewarmed.note`) says that the buffer
    cache was loaded ("pg_prewarm: …"), not that nothing could be ("prewarm not available: …") or that no prewarm
    ran (None, "")."""
    return bool(note) and str(note).startswith("pg_prewarm:")


def ensure(db: psycopg.Connection[Any]) -> str:
    """``CREATE EXTENSION IF NOT EXISTS pg_prewarm`` in the database ``db`` (autocommit) is connected to.

    Returns:
        "created" (now or earlier) or "refused: <server's error>" (a role that is not a superuser: the extension
        is not trusted). Never raises a psycopg error: without it the executor warms up by time alone and says why.
    """
    try:
        if db.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (EXTENSION,)).fetchone() is None:
            db.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        status = "created"
    except psycopg.Error as exc:
        status = f"refused: {error_line(exc)}"
    log.info("pg_prewarm.ensured", database=db.info.dbname, status=status, reason="buffer cache warm after restarts")
    return status


def load(
    db: psycopg.Connection[Any], budget_bytes: int, max_s: float, clock: Callable[[], float] = time.monotonic
) -> Prewarmed:
    """Read the relations of the connected database into shared buffers (``pg_prewarm`` mode ``buffer``), most
    used first (:data:`RELATIONS`), until ``budget_bytes`` (bytes) are loaded or ``max_s`` seconds have passed;
    the last relation may be loaded in part. A relation the server refuses (no SELECT privilege) is skipped with
    its error. The extension must exist in that database (:func:`ensure`).

    Raises:
        psycopg.Error: the relations could not be listed or the connection was lost.
    """
    began = clock()
    block = int(db.execute("SELECT current_setting('block_size')::int").fetchone()[0])  # type: ignore[index]
    out = Prewarmed(budget_bytes=budget_bytes, stopped="all loaded")
    for name, size, _used in db.execute(RELATIONS).fetchall():
        blocks, first, loaded = int(size) // block, 0, 0
        while first < blocks:
            room = (budget_bytes - out.bytes_loaded) // block
            if room <= 0:
                out.stopped = "shared_buffers full"
                break
            if clock() - began >= max_s:
                out.stopped = "time bound reached"
                break
            last = min(blocks, first + min(CHUNK_BLOCKS, room)) - 1
            try:
                got = db.execute("SELECT pg_prewarm(%s::regclass, 'buffer', 'main', %s, %s)", (name, first, last))
                n = int(got.fetchone()[0])  # type: ignore[index]
            except psycopg.errors.InsufficientPrivilege as exc:
                out.skipped[name] = error_line(exc)
                break
            loaded += n
            out.bytes_loaded += n * block
            first = last + 1
        if loaded:
            out.relations.append(name if first >= blocks else f"{name} (part)")
        if out.stopped != "all loaded":
            break
    out.seconds = round(clock() - began, 2)
    return out


def _untracked(db: psycopg.Connection[Any]) -> None:
    """Keep the prewarm's own statements out of pg_stat_statements (``pg_stat_statements.track = none``, manual
    F.32.3: superusers only), so the workload database's top statements stay the workload's; a role that may
    not set it leaves them tracked (its statement ``SELECT pg_prewarm(…)`` then shows there)."""
    try:
        db.execute("SET pg_stat_statements.track = 'none'")
    except psycopg.Error as exc:
        log.debug("pg_prewarm.tracked", reason=error_line(exc))


def fix_hint(database: str) -> str:
    """What a DBA does when the role may not create pg_prewarm in ``database`` (it is not a trusted extension,
    PostgreSQL 15 manual F.30): a superuser creates it there; ``agenticdb setup-role --apply`` creates it, but
    only in the role's benchmark database (``target.database``, agenticdb.cli.role_cmd)."""
    return (
        f"to prewarm, a superuser runs CREATE EXTENSION pg_prewarm in database {database} "
        "(agenticdb setup-role --apply creates it in target.database)"
    )


def prewarm_database(
    dsn: str, database: str | None, max_s: float, started_within_s: float | None = None
) -> Prewarmed | None:
    """Prewarm the workload's ``database`` (None: the DSN's own) of the server ``dsn`` reaches, bounded by
    :data:`FILL` × shared_buffers and ``max_s`` seconds, creating pg_prewarm there first when the role may.

    ``started_within_s``: only when the server started less than this many seconds ago
    (``pg_postmaster_start_time()``); otherwise None (nothing done: a server up for longer has the cache its
    own work left, which a prewarm must not evict).

    Returns:
        What was loaded, or a ``Prewarmed`` whose ``unavailable`` says why nothing was (the extension refused,
        the database not reachable, the relations not listed). Never raises.
    """
    conninfo = make_conninfo(dsn, dbname=database) if database else dsn
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as db:
            if started_within_s is not None:
                row = db.execute("SELECT extract(epoch FROM now() - pg_postmaster_start_time())::float8").fetchone()
                if row is None or float(row[0]) > started_within_s:
                    return None
            _untracked(db)
            status = ensure(db)
            if status != "created":
                where = db.info.dbname
                return Prewarmed(
                    unavailable=f"CREATE EXTENSION pg_prewarm in database {where} {status}; {fix_hint(where)}"
                )
            row = db.execute(
                "SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings "
                "WHERE name = 'shared_buffers'"
            ).fetchone()
            budget = int(FILL * int(row[0])) if row is not None else 0
            return load(db, budget, max_s)
    except psycopg.Error as exc:
        return Prewarmed(unavailable=f"database {database or 'of the DSN'}: {error_line(exc)}")
