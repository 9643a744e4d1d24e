"""A small MariaDB application for the live-mode tests, in its own process with its own connection.

Usage: ``python tests/live_app_my.py SOCKET SECONDS [--mix NAME[,NAME…] [--mix-period S] | --mix-file PATH]
[--reconnect S] [--setup]``

Shapes: a point read, an update, a filesort of 20 000 rows on an unindexed column, and two GROUP BYs on
an unindexed VARCHAR(64) column, whose implicit temporary table (one row per distinct key) goes to disk
when it outgrows min(tmp_table_size, max_heap_table_size) (MariaDB KB "Internal On-Disk Temporary
Tables", status variable Created_tmp_disk_tables). Measured on this 2-core host under load:

- ``group`` (200 000 keys): about 1–2 s per call at the 16 MiB defaults (on disk), 0.2–0.4 s at 64 MiB;
- ``group_small`` (60 000 keys): under 0.1 s at the defaults (in memory), about 0.6–1 s with
  tmp_table_size = 0 (on disk from the first row; the server rounds any value under its 16 kB block
  size, such as 1 kB, down to 0).

Mixes: "A" mostly point reads and a few sorts, "B" mostly updates and more sorts (the mix-only test),
"S" point reads, updates and a few ``group`` (the spill test), "T" mostly sorts and updates and a third
of S's share of ``group``: with ``group`` on disk the sorts take about half of T's time and ``group`` runs
at about half its rate in S (the spill test alternates S and T), "H" point reads, updates and ``group_small``
(the guard test). ``--mix S,T --mix-period 4`` moves to the next named mix every 4 s, round robin;
``--mix-file`` makes the mix follow the file (read every 0.1 s).
``--reconnect S`` opens a new connection every S seconds, like a pool with a connection lifetime:
settings changed with SET GLOBAL reach only new sessions (MariaDB KB "SET"). ``--setup`` creates and
fills database ``liveapp`` and exits. The app prints one line per phase with its counts by shape
(``phase S: {...}``) and, after SECONDS or on SIGTERM (once its current statement has finished), its
statement, error and connection counts (``app: {...}``).
"""

from __future__ import annotations

import argparse
import random
import signal
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
    "T": {"point": 10, "update": 30, "sort": 60, "group": 1},
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
    p.add_argument("--mix", default="A", help="a mix name, or several (comma-separated) for --mix-period")
    p.add_argument("--mix-period", type=float, default=0.0, help="seconds of each --mix in turn (0 = the first only)")
    p.add_argument("--mix-file", default=None)
    p.add_argument("--reconnect", type=float, default=0.0, help="seconds a connection lives (0 = forever)")
    p.add_argument("--setup", action="store_true")
    a = p.parse_args(argv)
    cycle = a.mix.split(",")
    if not all(name in MIXES for name in cycle):
        p.error(f"--mix: names from {sorted(MIXES)}")
    if a.mix_period and a.mix_file:
        p.error("--mix-period and --mix-file exclude each other")
    if a.setup:
        db = pymysql.connect(unix_socket=a.socket, user="root", autocommit=True)
        setup(db.cursor())
        return 0
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))  # the loop ends, counts printed
    db = connect(a.socket)
    opened = time.monotonic()
    rng, name, checked = random.Random(11), cycle[0], 0.0
    counts = {"statements": 0, "errors": 0, "connections": 1}
    end = time.monotonic() + a.seconds
    phase_end, phase = time.monotonic() + (a.mix_period or a.seconds), dict.fromkeys(SHAPES, 0)
    while time.monotonic() < end and not stop:
        if time.monotonic() >= phase_end:  # the application's traffic changes: the next mix in turn
            print(f"phase {name}: {phase}", flush=True)
            name, phase = cycle[(cycle.index(name) + 1) % len(cycle)], dict.fromkeys(SHAPES, 0)
            phase_end += a.mix_period
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
            phase[shape] += 1
        except pymysql.MySQLError as exc:  # the application goes on; its errors are in the digests
            counts["errors"] += 1
            print(f"error: {exc}", flush=True)
    print(f"phase {name}: {phase}", flush=True)
    print(f"app: {counts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
