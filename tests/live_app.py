"""A small application for the live-mode tests: its own process, its own connection, a few query shapes.

Usage: ``python tests/live_app.py DSN SECONDS [--mix-period S] [--sort-rows N] [--setup]``

Shapes: a point read, a short range aggregate, an update, and a sort of ``app_sort`` through a window
function (about 100 B of sort memory per row: 80 000 rows spill to disk at the default work_mem of
4 MB and fit in 16 MB). Every ``--mix-period`` seconds the mix flips between A (mostly point reads)
and B (mostly updates and range reads); the sort keeps a small share in both. ``--setup`` creates and
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
    "sort": 'SELECT max(rn) FROM (SELECT row_number() OVER (ORDER BY payload COLLATE "C") AS rn FROM app_sort) s',
}
MIX_A = {"point": 70, "range": 10, "update": 10, "sort": 3}
MIX_B = {"point": 10, "range": 40, "update": 40, "sort": 3}
ITEMS = 20000


def setup(db: psycopg.Connection, sort_rows: int) -> None:
    db.execute("DROP TABLE IF EXISTS app_items, app_sort")
    db.execute("CREATE TABLE app_items (id int PRIMARY KEY, v bigint NOT NULL)")
    db.execute(f"INSERT INTO app_items SELECT g, 0 FROM generate_series(1, {ITEMS}) g")
    db.execute("CREATE TABLE app_sort (payload text NOT NULL)")
    db.execute(f"INSERT INTO app_sort SELECT md5(g::text) FROM generate_series(1, {sort_rows}) g")
    db.execute("VACUUM ANALYZE app_items")
    db.execute("VACUUM ANALYZE app_sort")


def run(db: psycopg.Connection, seconds: float, period: float) -> None:
    rng = random.Random(7)
    end = time.monotonic() + seconds
    phase_end, mix, counts = time.monotonic() + period, MIX_A, dict.fromkeys(SHAPES, 0)
    while time.monotonic() < end:
        if time.monotonic() >= phase_end:
            print(f"phase {'A' if mix is MIX_A else 'B'}: {counts}", flush=True)
            mix, counts = (MIX_B if mix is MIX_A else MIX_A), dict.fromkeys(SHAPES, 0)
            phase_end += period
        shape = rng.choices(list(mix), weights=list(mix.values()))[0]
        key = rng.randint(1, ITEMS)
        args: tuple[int, ...] = () if shape == "sort" else (key, key) if shape == "range" else (key,)
        db.execute(SHAPES[shape], args)  # type: ignore[arg-type]
        counts[shape] += 1
    print(f"phase {'A' if mix is MIX_A else 'B'}: {counts}", flush=True)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("dsn")
    p.add_argument("seconds", type=float)
    p.add_argument("--mix-period", type=float, default=1e9)
    p.add_argument("--sort-rows", type=int, default=80000)
    p.add_argument("--setup", action="store_true")
    a = p.parse_args(argv)
    with psycopg.connect(a.dsn, autocommit=True) as db:
        if a.setup:
            setup(db, a.sort_rows)
            return 0
        run(db, a.seconds, a.mix_period)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
