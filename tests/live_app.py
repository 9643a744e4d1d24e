"""A small application for the live-mode tests: its own process, its own connection, a few query shapes.

Usage: ``python tests/live_app.py DSN SECONDS [--mix-period S | --mix-file PATH] [--sort-rows N] [--setup]``

Shapes: a point read, a short range aggregate, an update, a sort of ``app_sort`` through a window
function (about 100 B of sort memory per row: 80 000 rows spill to disk at the default work_mem of
4 MB and fit in 16 MB), and an anti-join ``NOT IN (subquery)`` over 40 000 keys of 233 bytes: the
planner hashes the subquery only when its hash table fits in work_mem × hash_mem_multiplier (about
10 MB needed), else it rescans a materialised copy (spilled to a temp file) for each of the 60 probe
rows (manual 9.23.3, 20.4.1). Measured on this 2-core host under load: about 2 s per call at 4 MB,
0.1–0.14 s at 16 MB. Every ``--mix-period`` seconds the mix flips between A (mostly point reads)
and B (mostly updates and range reads; six times the anti-joins, a sixth of the sorts); with
``--mix-file`` it follows the
mix named in that file ("A" or "B", read every 0.1 s) instead. ``--setup`` creates and
fills the tables and exits. The app prints one line per phase with its counts and exits after
SECONDS.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import psycopg

SHAPES = {
    "point": "SELECT v FROM app_items WHERE id = %s",
    "range": "SELECT count(*), sum(v) FROM app_items WHERE id BETWEEN %s AND %s + 200",
    "update": "UPDATE app_items SET v = v + 1 WHERE id = %s",
    "anti": "SELECT count(*) FROM app_probe WHERE k NOT IN (SELECT k FROM app_keys)",
    "sort": 'SELECT max(rn) FROM (SELECT row_number() OVER (ORDER BY payload COLLATE "C") AS rn FROM app_sort) s',
}
MIX_A = {"point": 70, "range": 10, "update": 10, "sort": 6, "anti": 1}
MIX_B = {"point": 10, "range": 40, "update": 40, "sort": 1, "anti": 6}
MIXES = {"A": MIX_A, "B": MIX_B}
ITEMS = 20000


def setup(db: psycopg.Connection, sort_rows: int) -> None:
    db.execute("DROP TABLE IF EXISTS app_items, app_sort, app_keys, app_probe")
    db.execute("CREATE TABLE app_items (id int PRIMARY KEY, v bigint NOT NULL)")
    db.execute(f"INSERT INTO app_items SELECT g, 0 FROM generate_series(1, {ITEMS}) g")
    db.execute("CREATE TABLE app_sort (payload text NOT NULL)")
    db.execute(f"INSERT INTO app_sort SELECT md5(g::text) FROM generate_series(1, {sort_rows}) g")
    pad = "repeat('x', 200)"
    db.execute(f"CREATE TABLE app_keys AS SELECT md5(g::text) || {pad} AS k FROM generate_series(1, 40000) g")
    db.execute(f"CREATE TABLE app_probe AS SELECT md5((-g)::text) || {pad} AS k FROM generate_series(1, 60) g")
    for t in ("app_keys", "app_probe"):
        db.execute(f"ANALYZE {t}")
    db.execute("VACUUM ANALYZE app_items")
    db.execute("VACUUM ANALYZE app_sort")


def _mix_from(path: str | None, current: str) -> str:
    if path is None:
        return current
    try:
        with open(path) as f:
            name = f.read().strip()
    except OSError:
        return current
    return name if name in MIXES else current


def run(db: psycopg.Connection, seconds: float, period: float, mix_file: str | None) -> None:
    """Run the shapes for ``seconds``: the mix flips every ``period`` s, or follows ``mix_file`` ("A"/"B")."""
    rng = random.Random(7)
    end = time.monotonic() + seconds
    phase_end, name, counts = time.monotonic() + period, _mix_from(mix_file, "A"), dict.fromkeys(SHAPES, 0)
    checked = 0.0
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= phase_end:
            print(f"phase {name}: {counts}", flush=True)
            name, counts = ("B" if name == "A" else "A"), dict.fromkeys(SHAPES, 0)
            phase_end += period
        if mix_file is not None and now - checked > 0.1:
            name, checked = _mix_from(mix_file, name), now
        mix = MIXES[name]
        shape = rng.choices(list(mix), weights=list(mix.values()))[0]
        key = rng.randint(1, ITEMS)
        args: tuple[int, ...] = () if shape in ("sort", "anti") else (key, key) if shape == "range" else (key,)
        db.execute(SHAPES[shape], args)  # type: ignore[arg-type]
        counts[shape] += 1
    print(f"phase {name}: {counts}", flush=True)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("dsn")
    p.add_argument("seconds", type=float)
    p.add_argument("--mix-period", type=float, default=1e9)
    p.add_argument("--sort-rows", type=int, default=80000)
    p.add_argument("--mix-file", default=None)
    p.add_argument("--setup", action="store_true")
    a = p.parse_args(argv)
    # prepare_threshold=None: plain queries, planned at each call (a prepared statement keeps the plan
    # made under the work_mem of its first executions).
    if a.setup:
        with psycopg.connect(a.dsn, autocommit=True, prepare_threshold=None) as db:
            setup(db, a.sort_rows)
        return 0
    # Like an application with a pool, it reconnects when the server goes away under it (a DBA's restart in
    # tests/test_live_outside_session.py): without it, a restart left the session's later windows without
    # the application's calls and the session failed on live.min_weight.
    end = time.monotonic() + a.seconds
    while (left := end - time.monotonic()) > 0:
        try:
            with psycopg.connect(a.dsn, autocommit=True, prepare_threshold=None, connect_timeout=5) as db:
                run(db, left, a.mix_period, a.mix_file)
        except psycopg.OperationalError:
            time.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
