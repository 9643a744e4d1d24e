"""A closed-loop query driver for the ``command`` workload (agenticdb/workloads/command.py contract).

Usage: ``python qloop.py QUERIES.json`` — the file holds ``{"queries": ["SELECT … {r} …"], "rmax": N}``;
each client thread runs the queries in turn, ``{r}`` replaced by a random integer in [1, rmax], for
``AGENTICDB_DURATION_S`` seconds, and the script prints the result line ``{"agenticdb": 1, …}`` with a
per-second series (tps = queries per second, p95_ms of each second). Connection details come from the
``AGENTICDB_DB_*`` variables the command workload passes in.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import threading
import time
from typing import Any


def _connect() -> Any:
    kind = os.environ["AGENTICDB_DB_KIND"]
    host = os.environ.get("AGENTICDB_DB_HOST") or None
    port = int(os.environ.get("AGENTICDB_DB_PORT") or 0) or None
    user = os.environ.get("AGENTICDB_DB_USER") or None
    password = os.environ.get("AGENTICDB_DB_PASSWORD") or None
    db = os.environ.get("AGENTICDB_DB_NAME") or None
    sock = os.environ.get("AGENTICDB_DB_SOCKET") or None
    if kind == "postgresql":
        import psycopg

        return psycopg.connect(host=sock or host, port=port, user=user, password=password, dbname=db, autocommit=True)
    import pymysql

    return pymysql.connect(
        host=host or "localhost",
        port=port or 3306,
        user=user,
        password=password or "",
        database=db,
        unix_socket=sock,
        autocommit=True,
    )


def _client(queries: list[str], rmax: int, stop: float, out: list[tuple[float, float]], errors: list[int]) -> None:
    try:
        conn = _connect()
    except Exception as exc:  # noqa: BLE001 - reported: a run without connections must not look idle
        print(f"qloop: cannot connect: {exc}", file=sys.stderr)
        errors[0] += 1
        return
    rnd = random.Random()
    i = rnd.randrange(len(queries))
    done = 0
    # Each client finishes at least one query (a short warm-up on a slow faulty server must not end
    # with nothing completed), within 10 × the run as a hard cap.
    cap = stop + 10 * max(stop - time.monotonic(), 1.0)
    while time.monotonic() < stop or (done == 0 and time.monotonic() < cap):
        sql = queries[i % len(queries)].replace("{r}", str(rnd.randint(1, rmax)))
        i += 1
        t0 = time.monotonic()
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                if cur.description is not None:
                    cur.fetchall()
        except Exception:  # noqa: BLE001 - counted; the command workload fails the run above max_error_rate
            errors[0] += 1
            continue
        out.append((time.monotonic(), (time.monotonic() - t0) * 1000))
        done += 1
    conn.close()


def main(path: str) -> None:
    spec = json.loads(open(path).read())
    duration = float(os.environ.get("AGENTICDB_DURATION_S", "10"))
    clients = int(os.environ.get("AGENTICDB_CLIENTS", "1"))
    t_start = time.monotonic()
    stop = t_start + duration
    samples: list[tuple[float, float]] = []
    errors = [0]
    threads = [
        threading.Thread(target=_client, args=(spec["queries"], int(spec.get("rmax", 1)), stop, samples, errors))
        for _ in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = max(time.monotonic() - t_start, 1e-3)
    series = []
    for sec in range(max(int(duration), int(elapsed))):
        lat = sorted(ms for ts, ms in samples if sec <= ts - t_start < sec + 1)
        p95 = lat[int(0.95 * (len(lat) - 1))] if lat else None
        series.append({"t_s": sec, "tps": float(len(lat)), "p95_ms": p95})
    lats = sorted(ms for _, ms in samples)
    result = {
        "agenticdb": 1,
        "tps": len(samples) / elapsed,
        "transactions": len(samples),
        "errors": errors[0],
        "duration_s": elapsed,
        "mean_ms": statistics.fmean(lats) if lats else None,
        "p95_ms": lats[int(0.95 * (len(lats) - 1))] if lats else None,
        "series": series,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
