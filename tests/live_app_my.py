"""A small MariaDB application for the live-mode tests, in its own process with its own connection.

Usage: ``python tests/live_app_my.py SOCKET SECONDS [--mix NAME] [--mix-file PATH] [--reconnect S] [--setup]``

Shapes: a point read, an update, a filesort of 20 000 rows on an unindexed column, and two GROUP BYs on
an unindexed VARCHAR(64) column, whose implicit temporary table (one row per distinct key) goes to disk
when it outgrows min(tmp_table_size, max_heap_table_size) (MariaDB KB "Internal On-Disk Temporary
Tables", status variable Created_tmp_disk_tables). Measured on this 2-core host under load:

- ``group`` (200 000 keys): about 1.5–2 s per call at the 16 MiB defaults (on disk), 0.3–0.4 s at 64 MiB;
- ``group_small`` (60 000 keys): under 0.15 s at the defaults (in memory), about 1–2 s with
  tmp_table_size = 1 kB (on disk from the first row).

Mixes: "A" mostly point reads and a few sorts, "B" mostly updates and more sorts (the mix-only test),
"S" point reads, updates and a few ``group`` (the spill test), "H" point reads, updates and
``group_small`` (the guard test). ``--mix-file`` makes the mix follow the file (read every 0.1 s).
``--reconnect S`` opens a new connection every S seconds, like a pool with a connection lifetime:
settings changed with SET GLOBAL reach only new sessions (MariaDB KB "SET"). ``--setup`` creates and
fills database ``liveapp`` and exits. At the end the app prints its statement counts and errors.
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import pymysql

SHAPES = {
    "point": "SELECT v FROM items WHERE id = %s",
    "update": "UPDATE items SET v = v + 1 WHERE id = %s",
    "sort": "SELECT id FROM items ORDER BY pad, v LIMIT 5000, 1",
    "group": "SELECT k, count(*) FROM big_groups GROUP BY k ORDER BY NULL LIMIT 1",
    "group_small": "SELECT k, count(*) FROM small_groups GROUP BY k ORDER BY NULL LIMIT 1",
}
NO_ARGS = ("sort", "group", "group_small")
MIXES = {
    "A": {"point": 80, "update": 10, "sort": 2},
    "B": {"point": 10, "update": 80, "sort": 8},
    "S": {"point": 70, "update": 20, "group": 3},
    "H": {"point": 70, "update": 20, "group_small": 10},
}
ITEMS = 20000
GROUP_ROWS = {"big_groups": 200000, "small_groups": 60000}


def setup(cur: pymysql.cursors.Cursor) -> None:
    cur.execute("CREATE DATABASE IF NOT EXISTS liveapp")
    cur.execute("USE liveapp")
    cur.execute("DROP TABLE IF EXISTS liveapp.items")
    cur.execute("CREATE TABLE liveapp.items (id INT PRIMARY KEY, v BIGINT NOT NULL, pad CHAR(64) NOT NULL)")
    cur.execute(
        "INSERT INTO liveapp.items SELECT seq, 0, MD5(seq) FROM seq_1_to_%s" % ITEMS  # noqa: UP031 - a constant
    )
    for table, rows in GROUP_ROWS.items():
        cur.execute(f"DROP TABLE IF EXISTS liveapp.{table}")
        cur.execute(f"CREATE TABLE liveapp.{table} (id INT PRIMARY KEY, k VARCHAR(64) NOT NULL, v INT NOT NULL)")
        cur.execute(f"INSERT INTO liveapp.{table} SELECT seq, MD5(seq), seq % 100 FROM seq_1_to_{rows}")


def mix_of(path: str | None, current: str) -> str:
    if path is None:
        return current
    try:
        with open(path) as f:
            name = f.read().strip()
    except OSError:
        return current
    return name if name in MIXES else current


def connect(socket: str) -> pymysql.connections.Connection:
    return pymysql.connect(unix_socket=socket, user="root", autocommit=True, database="liveapp")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("socket")
    p.add_argument("seconds", type=float)
    p.add_argument("--mix", default="A", choices=sorted(MIXES))
    p.add_argument("--mix-file", default=None)
    p.add_argument("--reconnect", type=float, default=0.0, help="seconds a connection lives (0 = forever)")
    p.add_argument("--setup", action="store_true")
    a = p.parse_args(argv)
    if a.setup:
        db = pymysql.connect(unix_socket=a.socket, user="root", autocommit=True)
        setup(db.cursor())
        return 0
    db = connect(a.socket)
    opened = time.monotonic()
    rng, name, checked = random.Random(11), a.mix, 0.0
    counts = {"statements": 0, "errors": 0, "connections": 1}
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        if time.monotonic() - checked > 0.1:
            name, checked = mix_of(a.mix_file, name), time.monotonic()
        if a.reconnect > 0 and time.monotonic() - opened > a.reconnect:
            db.close()
            db, opened = connect(a.socket), time.monotonic()
            counts["connections"] += 1
        mix = MIXES[name]
        shape = rng.choices(list(mix), weights=list(mix.values()))[0]
        cur = db.cursor()
        try:
            cur.execute(SHAPES[shape], () if shape in NO_ARGS else (rng.randint(1, ITEMS),))
            cur.fetchall()
            counts["statements"] += 1
        except pymysql.MySQLError as exc:  # the application goes on; its errors are in the digests
            counts["errors"] += 1
            print(f"error: {exc}", flush=True)
    print(f"app: {counts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
