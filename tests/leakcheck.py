"""Test isolation (issue 39): no test's process or private server outlives the test that made it.

A pytest plugin (registered by tests/conftest.py). After each test's teardown (every function-scoped
fixture finalized, and the module/session fixtures that the next test no longer needs), it looks for

- processes descended from the pytest process (recursively), and
- private servers — PostgreSQL postmasters and mariadbd/mysqld — whose data directory lies under a temp
  dir this pytest process made (``tempfile.mkdtemp``, which ``TemporaryDirectory`` also uses) or under
  pytest's base temp dir. ``pg_ctl start`` detaches the postmaster from its parent, so it is no
  descendant; other pytest runs on the same host keep their servers in their own dirs and are not seen.

that were not there when the test run began and are not owned by a module/session-scoped fixture still
in use. A fixture of wider scope owns the processes that appeared while it was set up and every server
under a temp dir it made then (a test may restart such a server: the new postmaster is still the
fixture's). Once the fixture is finalized, its processes must be gone too.

Processes still exiting get a grace period (polled every 0.1 s, up to ``GRACE_S``); what remains errors
the test at teardown with pid, command line and owner of each, e.g.::

    ERROR at teardown of test_x
    processes outlived tests/test_a.py::test_x (stop them where they were started):
      pid 4242 (started during the test or by its function-scoped fixtures): sleep 30

Each leftover is reported once. Zombies (exited, not yet reaped) are not alive and are ignored.

Processes are read from ``/proc/<pid>/stat`` (proc(5): comm, state, ppid, starttime), about three times
cheaper than ``psutil.process_iter`` with the same fields (5 vs 15 ms for ~100 processes on the 2-core
test host); psutil gives the command line and working directory of the few candidates. Linux only, as
the suite is.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from collections.abc import Callable, Collection, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

GRACE_S = 2.0
"""How long a leftover may take to exit after teardown before it is reported (seconds)."""

SERVER_NAMES = frozenset({"postgres", "postmaster", "mariadbd", "mysqld"})
"""comm names of the servers whose data directory is checked (postgres backends are skipped: their parent
is the postmaster)."""

INTERPRETER_HELPERS = (
    b"from multiprocessing.resource_tracker import main",
    b"from multiprocessing.forkserver import main",
)
"""Command lines of the helpers multiprocessing starts once per interpreter, on first use, and that live until
the interpreter exits (Python docs, multiprocessing "Contexts and start methods": the resource tracker and
the fork server): pytest's own, not a test's leftover (seen: test_sqlite_create's first use of
multiprocessing started the resource tracker, which the check then blamed on that test)."""

Key = tuple[int, int]
"""(pid, start time in clock ticks since boot): one process, never a later one reusing its pid."""


@dataclass(frozen=True)
class Proc:
    """One process as read from /proc/<pid>/stat."""

    pid: int
    ppid: int
    comm: str
    start: int

    @property
    def key(self) -> Key:
        return (self.pid, self.start)


def read_procs() -> dict[int, Proc]:
    """Every live (non-zombie) process by pid, from /proc/<pid>/stat; vanished ones are skipped."""
    out: dict[int, Proc] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        # comm may hold spaces and parentheses: it ends at the last ')'.
        left, right = raw.index(b"("), raw.rindex(b")")
        rest = raw[right + 2 :].split()
        if rest[0] in (b"Z", b"X"):  # zombie / dead
            continue
        pid = int(name)
        out[pid] = Proc(pid, int(rest[1]), raw[left + 1 : right].decode(errors="replace"), int(rest[19]))
    return out


@dataclass
class Owner:
    """A module/session (or class/package) fixture instance and what it started while being set up."""

    name: str
    scope: str
    keys: set[Key] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)


@dataclass(eq=False)  # hashable by identity: pluggy keeps plugins in dicts
class LeakCheck:
    """The plugin's state for one pytest process (see the module docstring)."""

    pid: int = field(default_factory=os.getpid)
    temp_dirs: list[str] = field(default_factory=list)  # in the order made (a fixture's are a slice)
    temp_set: set[str] = field(default_factory=set)
    baseline: set[Key] = field(default_factory=set)
    reported: set[Key] = field(default_factory=set)
    active: dict[int, Owner] = field(default_factory=dict)  # id(fixturedef) -> owner
    finished: dict[Key, Owner] = field(default_factory=dict)  # processes of finalized fixtures
    finished_owners: list[Owner] = field(default_factory=list)
    _datadir: dict[Key, str | None] = field(default_factory=dict)
    _helpers: dict[Key, bool] = field(default_factory=dict)
    _mkdtemp: Callable[..., Any] | None = None

    # -- temp dirs of this process ------------------------------------------------------------------

    def track_mkdtemp(self) -> None:
        """Record every ``tempfile.mkdtemp`` result of this process (until ``untrack_mkdtemp``)."""
        original = tempfile.mkdtemp
        self._mkdtemp = original

        @functools.wraps(original)
        def mkdtemp(*args: Any, **kwargs: Any) -> Any:
            path = original(*args, **kwargs)
            self._add_dir(os.fsdecode(path))
            return path

        tempfile.mkdtemp = mkdtemp

    def _add_dir(self, path: str) -> None:
        real = os.path.realpath(path)
        self.temp_dirs.append(real)
        self.temp_set.add(real)

    def untrack_mkdtemp(self) -> None:
        if self._mkdtemp is not None:
            tempfile.mkdtemp = self._mkdtemp
            self._mkdtemp = None

    @staticmethod
    def _ours(path: str, dirs: Collection[str]) -> bool:
        """True when ``path`` is one of ``dirs`` or below one (all real paths)."""
        p = Path(path)
        return any(str(d) in dirs for d in (p, *p.parents))

    # -- what runs now ------------------------------------------------------------------------------

    def _server_dir(self, proc: Proc, procs: dict[int, Proc]) -> str | None:
        """The data dir of a top-level server process under one of our temp dirs, else None (cached)."""
        if proc.comm not in SERVER_NAMES:
            return None
        parent = procs.get(proc.ppid)
        if parent is not None and parent.comm in SERVER_NAMES:
            return None  # a postgres backend or helper process
        if proc.key in self._datadir:
            return self._datadir[proc.key]
        found: str | None = None
        try:
            p = psutil.Process(proc.pid)
            # Both servers chdir to their data directory; the command line is the fallback (-D DIR,
            # --datadir=DIR, --defaults-file=DIR/my.cnf) when the working dir is unreadable.
            candidates = [p.cwd()] if os.geteuid() == 0 else []
            for arg in p.cmdline():
                candidates.append(arg.split("=", 1)[-1])
        except psutil.Error:
            candidates = []
        for c in candidates:
            if c.startswith("/") and self._ours(os.path.realpath(c), self.temp_set):
                found = os.path.realpath(c)
                break
        self._datadir[proc.key] = found
        return found

    def snapshot(self) -> tuple[dict[Key, Proc], dict[Key, str]]:
        """(our descendants and our servers by key, the data dir of each server by key)."""
        procs = read_procs()
        children: dict[int, list[int]] = {}
        for p in procs.values():
            children.setdefault(p.ppid, []).append(p.pid)
        found: dict[Key, Proc] = {}
        stack = list(children.get(self.pid, []))
        while stack:
            pid = stack.pop()
            found[procs[pid].key] = procs[pid]
            stack.extend(children.get(pid, []))
        servers: dict[Key, str] = {}
        for p in procs.values():
            data = self._server_dir(p, procs)
            if data is not None:
                servers[p.key] = data
                found[p.key] = p
        live = {p.key for p in procs.values()}
        self._datadir = {k: v for k, v in self._datadir.items() if k in live}
        return found, servers

    # -- ownership ----------------------------------------------------------------------------------

    def _allowed(self, key: Key, found: dict[Key, Proc], servers: dict[Key, str], by_pid: dict[int, Proc]) -> bool:
        """True when the run's baseline or an active wider-scoped fixture holds the process, its data dir or
        an ancestor."""
        proc: Proc | None = found[key]
        if proc is not None and proc.ppid == self.pid and self._helper(proc):
            return True
        while proc is not None:
            k = proc.key
            if k in self.baseline:
                return True
            for owner in self.active.values():
                if k in owner.keys:
                    return True
                if k in servers and self._ours(servers[k], owner.dirs):
                    return True
            proc = by_pid.get(proc.ppid)
        return False

    def _helper(self, proc: Proc) -> bool:
        """Whether ``proc`` is one of the interpreter's multiprocessing helpers (:data:`INTERPRETER_HELPERS`)."""
        if proc.key not in self._helpers:
            try:
                with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ")
            except OSError:
                cmd = b""
            self._helpers[proc.key] = any(h in cmd for h in INTERPRETER_HELPERS)
        return self._helpers[proc.key]

    def leftovers(self) -> dict[Key, Proc]:
        """Live processes that nothing active owns and that were not reported before."""
        found, servers = self.snapshot()
        by_pid = {p.pid: p for p in found.values()}
        return {
            k: p for k, p in found.items() if k not in self.reported and not self._allowed(k, found, servers, by_pid)
        }

    def describe(self, key: Key, proc: Proc) -> str:
        try:
            cmd = " ".join(psutil.Process(proc.pid).cmdline()) or proc.comm
        except psutil.Error:
            cmd = proc.comm
        data = self._datadir.get(key)
        owner = self.finished.get(key) or next(
            (o for o in reversed(self.finished_owners) if data and self._ours(data, o.dirs)), None
        )
        whose = (
            f"set up by {owner.scope}-scoped fixture '{owner.name}', already finalized"
            if owner
            else "started during the test or by its function-scoped fixtures"
        )
        where = f", data dir {data}" if data else ""
        return f"  pid {proc.pid} ({whose}{where}): {cmd[:300]}"

    def check(self, nodeid: str) -> str | None:
        """The report of what outlived ``nodeid`` after up to GRACE_S, or None; marks it reported."""
        left = self.leftovers()
        deadline = time.monotonic() + GRACE_S
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            now = self.leftovers()
            left = {k: p for k, p in left.items() if k in now}
        if not left:
            return None
        lines = [self.describe(k, p) for k, p in sorted(left.items())]
        self.reported |= set(left)
        return f"processes outlived {nodeid} (stop them where they were started):\n" + "\n".join(lines)

    # -- hooks --------------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        factory = getattr(session.config, "_tmp_path_factory", None)  # pytest's tmp_path plugin
        if factory is not None:
            self._add_dir(str(factory.getbasetemp()))
        self.baseline = set(self.snapshot()[0])
        return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        if fixturedef.scope == "function":
            return (yield)
        before = set(self.snapshot()[0])
        n_dirs = len(self.temp_dirs)
        try:
            return (yield)
        finally:
            found, servers = self.snapshot()
            owned = set().union(*(o.keys for o in self.active.values())) if self.active else set()
            owner = Owner(fixturedef.argname, fixturedef.scope)
            owner.keys = set(found) - before - owned
            owner.dirs = set(self.temp_dirs[n_dirs:]) | {servers[k] for k in owner.keys if k in servers}
            self.active[id(fixturedef)] = owner

    @pytest.hookimpl
    def pytest_fixture_post_finalizer(self, fixturedef: pytest.FixtureDef[Any]) -> None:
        owner = self.active.pop(id(fixturedef), None)
        if owner is not None:
            self.finished_owners.append(owner)
            for key in owner.keys:
                self.finished[key] = owner

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        try:
            result = yield
        except BaseException as exc:  # a fixture's teardown failed (or pytest.fail/skip in it)
            if not isinstance(exc, KeyboardInterrupt | SystemExit):
                report = self.check(item.nodeid)
                if report is not None:
                    exc.add_note(report)
            raise
        report = self.check(item.nodeid)
        if report is not None:
            pytest.fail(report, pytrace=False)
        return result


def register(config: pytest.Config) -> None:
    """Install the check into this pytest run (from ``pytest_configure``)."""
    plugin = LeakCheck()
    plugin.track_mkdtemp()
    config.add_cleanup(plugin.untrack_mkdtemp)
    config.pluginmanager.register(plugin, "agenticdb-leakcheck")
