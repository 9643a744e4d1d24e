"""The TPC-H data load's cost at several scale factors, the basis of its load-time estimate
(``agenticdb.workload_kinds``: ``_TPCH_LOAD.rate``).

``TpchWorkload.prepare()`` (tpchgen-cli, COPY, indexes, ANALYZE) on a private PostgreSQL sandbox, per scale factor:
the wall time, and the CPU time of tpchgen-cli (this process's children) and of the server's exited backends and
parallel workers (the postmaster's ``cutime + cstime``, /proc/<pid>/stat fields 16-17). On a shared host the wall
time grows with the other jobs' load; the CPU time hardly does, and on an idle 2-core host the load's wall time
is about its CPU time (COPY is one backend; tpchgen and the index builds use both cores).

    nice -n 19 .venv/bin/python -m benchmarks.bench_tpch_load 0.1 0.3 1
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

from agenticdb.config.sections import WorkloadConfig
from agenticdb.sandbox.postgres import PostgresSandbox
from agenticdb.workload_kinds import estimate_load
from agenticdb.workloads.registry import connection_from_dsn
from agenticdb.workloads.tpch import TpchWorkload

DATABASE = "tpch_load"


def _children_cpu_s(pid: int | None = None) -> float:
    """CPU seconds (user + system) of the exited, reaped children of ``pid`` (None: this process)."""
    if pid is None:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def main(scales: list[float]) -> None:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-tpchload-"))
    os.chmod(base, 0o755)  # the server's OS user reaches its data dir
    sandbox = PostgresSandbox(base)
    info = sandbox.up()
    try:
        postmaster = int(Path(info.data_dir, "postmaster.pid").read_text().split()[0])
        conn = connection_from_dsn("postgresql", info.dsn, DATABASE)
        for sf in scales:
            workload = TpchWorkload(WorkloadConfig(kind="tpch", scale=sf), conn, progress=False)
            began, tool0, server0 = time.monotonic(), _children_cpu_s(), _children_cpu_s(postmaster)
            workload.prepare()
            time.sleep(1.0)  # the load's backend exits and the postmaster reaps it (its CPU time is counted then)
            wall = time.monotonic() - began - 1.0
            tool, server = _children_cpu_s() - tool0, _children_cpu_s(postmaster) - server0
            with psycopg.connect(make_conninfo(info.dsn, dbname=DATABASE)) as db:
                row = db.execute("SELECT pg_database_size(current_database())").fetchone()
            est = estimate_load("tpch", sf)
            print(
                f"SF {sf:g}: wall {wall:.1f} s, CPU {tool + server:.1f} s "
                f"(tpchgen {tool:.1f} s, server {server:.1f} s), "
                f"database {(row[0] if row else 0) / 1e6:.0f} MB; estimate {est.seconds if est else 0:.0f} s; "
                f"load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        sandbox.down()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]] or [0.1, 0.3, 1.0])
