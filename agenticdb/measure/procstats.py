"""CPU time and CPU wait of *our* processes: the database server's process tree, the benchmark tool's
process tree, and agenticdb's own process (used by ``agenticdb.measure.disturbance``, docs/measurement.md).

Two sources, read together by ``OursCpu.read``:

- CPU time from psutil ``Process.cpu_times`` (/proc/<pid>/stat ``utime``/``stime`` and the reaped
  children's ``cutime``/``cstime``, proc(5)). Roots are counted with the children they reaped: a
  PostgreSQL backend that exits between two reads is not lost, the postmaster reaps it.
- Run-queue wait from /proc/<pid>/task/<tid>/schedstat: "time spent on the cpu", "time spent waiting on
  a runqueue" (ns) per thread (Documentation/scheduler/sched-stats.rst). Our CPU share, the part of
  their runnable time our threads spent on a CPU, falls when an outside process takes CPUs from them,
  even on a host that was saturated already, where the outside CPU usage cannot grow any more.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import psutil

Key = tuple[int, float]
"""A process: (pid, create time), so a reused pid is a different process."""


@dataclass(frozen=True)
class _Seen:
    cpu_s: float  # user + system, plus reaped children's when ``with_children``
    ppid: int
    with_children: bool


@dataclass(frozen=True)
class OursDelta:
    """What our processes did between two reads: CPU seconds used (``cpu_s``), and of the threads alive
    at both reads, seconds on a CPU (``run_s``) and waiting on a run queue (``wait_s``)."""

    cpu_s: float
    run_s: float
    wait_s: float

    @property
    def share_pct(self) -> float | None:
        """Our CPU share: the part (%) of their runnable time our threads spent on a CPU rather than
        waiting for one; None when they were runnable for less than 50 ms in total (the ratio would be
        noise)."""
        runnable = self.run_s + self.wait_s
        return 100.0 * self.run_s / runnable if runnable >= 0.05 else None


def _schedstat(pid: int) -> dict[int, tuple[int, int]]:
    """``{tid: (run ns, wait ns)}`` for the threads of ``pid`` (empty when it is gone or unreadable)."""
    out: dict[int, tuple[int, int]] = {}
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"{base}/{tid}/schedstat") as f:
                run, wait, *_ = f.read().split()
            out[int(tid)] = (int(run), int(wait))
        except (OSError, ValueError):
            continue
    return out


class OursCpu:
    """CPU seconds and CPU share of our processes between successive ``read`` calls.

    A process that vanished since the last read and was reaped by a tracked parent that counts its
    children is subtracted once, so it is not counted twice. agenticdb's own process counts without its
    children: the benchmark tool is tracked as a root of its own, and any other child (e.g. a test's CPU
    hog) is not ours.

    Args:
        own_pid: agenticdb's process (default: this one).
    """

    def __init__(self, own_pid: int | None = None) -> None:
        self.own_pid = own_pid if own_pid is not None else os.getpid()
        self.roots: set[int] = set()
        self._lock = threading.Lock()
        self._seen: dict[Key, _Seen] | None = None
        self._threads: dict[tuple[Key, int], tuple[int, int]] = {}
        self._last_clock = 0.0

    def add_root(self, pid: int) -> None:
        """Track ``pid`` and its descendants from the next read on (thread-safe)."""
        with self._lock:
            self.roots.add(pid)

    def _processes(self) -> dict[Key, tuple[_Seen, psutil.Process]]:
        with self._lock:
            roots = sorted(self.roots)
        found: dict[Key, tuple[_Seen, psutil.Process]] = {}
        self._add(found, psutil.Process(self.own_pid), with_children=False)
        for root in roots:
            try:
                proc = psutil.Process(root)
                tree = [proc, *proc.children(recursive=True)]
            except psutil.Error:
                continue
            for p in tree:
                self._add(found, p, with_children=True)
        return found

    @staticmethod
    def _add(found: dict[Key, tuple[_Seen, psutil.Process]], proc: psutil.Process, with_children: bool) -> None:
        try:
            with proc.oneshot():
                t = proc.cpu_times()
                key = (proc.pid, proc.create_time())
                cpu = t.user + t.system + ((t.children_user + t.children_system) if with_children else 0.0)
                found.setdefault(key, (_Seen(cpu, proc.ppid(), with_children), proc))
        except psutil.Error:
            pass  # exited meanwhile: its parent's reaped-children time will carry it

    def read(self) -> OursDelta:
        """What our processes did since the previous call (all zero on the first call)."""
        # psutil's create_time is boot time (whole seconds, /proc/stat btime) + start ticks since boot,
        # so "started since the last read" is judged on that clock, not on time.time().
        clock = psutil.boot_time() + time.clock_gettime(time.CLOCK_BOOTTIME)
        found = self._processes()
        now = {key: seen for key, (seen, _) in found.items()}
        threads = {(key, tid): v for key, (_, proc) in found.items() for tid, v in _schedstat(proc.pid).items()}
        prev, self._seen = self._seen, now
        prev_threads, self._threads = self._threads, threads
        last_clock, self._last_clock = self._last_clock, clock
        if prev is None:
            return OursDelta(0.0, 0.0, 0.0)
        run = sum(v[0] - prev_threads[k][0] for k, v in threads.items() if k in prev_threads)
        wait = sum(v[1] - prev_threads[k][1] for k, v in threads.items() if k in prev_threads)
        return OursDelta(cpu_s=_cpu_used(prev, now, last_clock), run_s=max(run, 0) / 1e9, wait_s=max(wait, 0) / 1e9)


def _cpu_used(prev: dict[Key, _Seen], now: dict[Key, _Seen], last_clock: float) -> float:
    """CPU seconds between two snapshots of our processes (see ``OursCpu``)."""
    used = 0.0
    for key, cur in now.items():
        if key in prev:
            used += cur.cpu_s - prev[key].cpu_s
        elif key[1] >= last_clock - 0.05:
            used += cur.cpu_s  # started since the last read: all its CPU is new
    prev_by_pid = {key[0]: key for key in prev}
    for key, old in prev.items():
        if key not in now and _reaper(key, prev, now, prev_by_pid) is not None:
            used -= old.cpu_s  # reaped: its whole time moved into an ancestor's children time
    return max(used, 0.0)


def _reaper(key: Key, prev: dict[Key, _Seen], now: dict[Key, _Seen], prev_by_pid: dict[int, Key]) -> Key | None:
    """The tracked ancestor whose children time now holds the vanished ``key``'s CPU: the nearest one
    still alive, reached through parents that vanished too (each was reaped by its own parent), provided
    every one on the way counts its children. None when the CPU went outside what we track."""
    seen: set[Key] = set()
    while key not in seen:
        seen.add(key)
        parent = prev_by_pid.get(prev[key].ppid)
        if parent is None:
            return None
        if parent in now:
            return parent if now[parent].with_children else None
        if not prev[parent].with_children:
            return None
        key = parent
    return None
