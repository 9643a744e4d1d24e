"""A small MariaDB application for the live-mode tests, in its own process with its own connection.

Usage: ``python tests/live_app_my.py SOCKET SECONDS --mix-file PATH [--setup]``

Shapes: a point read, an update, and a filesort of 20 000 rows on an unindexed column. The mix follows
the file ("A": mostly point reads and a few sorts, "B": mostly updates and more sorts), read every 0.1 s.
``--setup`` creates and fills database ``liveapp`` and exits.
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
}
MIXES = {"A": {"point": 80, "update": 10, "sort": 2}, "B": {"point": 10, "update": 80, "sort": 8}}
ITEMS = 20000


def setup(cur: pymysql.cursors.Cursor) -> None:
    cur.execute("CREATE DATABASE IF NOT EXISTS liveapp")
    cur.execute("USE liveapp")
    cur.execute("DROP TABLE IF EXISTS liveapp.items")
    cur.execute("CREATE TABLE liveapp.items (id INT PRIMARY KEY, v BIGINT NOT NULL, pad CHAR(64) NOT NULL)")
    cur.execute(
        "INSERT INTO liveapp.items SELECT seq, 0, MD5(seq) FROM seq_1_to_%s" % ITEMS  # noqa: UP031 - a constant
    )


def mix_of(path: str, current: str) -> str:
    try:
        with open(path) as f:
            name = f.read().strip()
    except OSError:
        return current
    return name if name in MIXES else current


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("socket")
    p.add_argument("seconds", type=float)
    p.add_argument("--mix-file", required=True)
    p.add_argument("--setup", action="store_true")
    a = p.parse_args(argv)
    db = pymysql.connect(unix_socket=a.socket, user="root", autocommit=True)
    cur = db.cursor()
    if a.setup:
        setup(cur)
        return 0
    cur.execute("USE liveapp")
    rng, name, checked = random.Random(11), "A", 0.0
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        if time.monotonic() - checked > 0.1:
            name, checked = mix_of(a.mix_file, name), time.monotonic()
        mix = MIXES[name]
        shape = rng.choices(list(mix), weights=list(mix.values()))[0]
        cur.execute(SHAPES[shape], () if shape == "sort" else (rng.randint(1, ITEMS),))
        cur.fetchall()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
