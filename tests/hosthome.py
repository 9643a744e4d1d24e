"""Test isolation: no test writes agenticdb's real places on the host (its data home, config, units).

A pytest plugin (registered by tests/conftest.py). Two parts:

- **The default home is a session temp dir.** ``$AGENTICDB_HOME`` is set, for the pytest process and so for
  every process a test starts with the inherited environment, to an empty dir made for this run and removed
  at its end. Without it a test that forgets ``--home``/``storage.home`` uses the host's real home
  (``agenticdb.config.sections.default_data_home``: ``/var/lib/agenticdb`` as root, else
  ``~/.local/share/agenticdb``). The variable is overwritten, not defaulted: a value exported in the shell
  that runs the suite (say ``/var/lib/agenticdb`` from a service environment) is a real home too. A test of the
  resolution itself sets or removes the variable with ``monkeypatch``.
- **The host's places are checked.** A test during which this pytest process wrote under :func:`host_paths`
  (or ``/etc/systemd/system/agenticdb*``) errors at teardown, naming each path (once): the writes are seen by a
  ``sys.addaudithook`` hook (``open`` for writing, ``os.mkdir``, ``os.rename``, ``os.symlink``, ``os.link``,
  ``sqlite3.connect``), inside a place that existed before the run too. A place that did not exist when the run
  began and exists after it, with no such write, fails the run at its end without blaming a test: a process a
  test started (one given an environment without ``$AGENTICDB_HOME``) or another process on this shared host
  made it — ``scripts/demo.sh``, an ``agenticdb`` run without ``--home``, a parallel test run — and the message
  says to read it before removing anything (blamed on the test that happened to be tearing down, a demo's
  journal and sandbox once read as that test's leftovers to remove).

Seen (2026-12-07): a root run of the whole suite left ``/var/lib/agenticdb`` with an empty journal.db,
journal.key and memory.db: the stores ``app.open_stores`` creates before ``tune`` finds its target unreachable.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import shutil
import sys
import tempfile
from collections.abc import Generator, Iterable
from pathlib import Path

import pytest

UNIT_GLOB = "/etc/systemd/system/agenticdb*"
"""systemd units as ``systemd/agenticdb.service`` says to install them (watched by glob: any name)."""


def host_paths() -> list[Path]:
    """agenticdb's places on this host: the data homes of ``default_data_home`` (root's and this user's, read
    before the session home is set), the config dir the docs name, the runtime dir and this user's config dir."""
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return [
        Path("/var/lib/agenticdb"),
        Path(xdg) / "agenticdb",
        Path("/etc/agenticdb"),
        Path("/run/agenticdb"),
        Path.home() / ".config" / "agenticdb",
    ]


WRITE_EVENTS = frozenset({"open", "os.mkdir", "os.rename", "os.symlink", "os.link", "sqlite3.connect"})
"""Audit events (docs.python.org "Audit events table") by which a process writes a path; ``open`` only with a
write flag (O_WRONLY, O_RDWR, O_CREAT)."""

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT


class HostPaths:
    """The host places ``paths`` (plus the matches of ``unit_glob``): which appeared since :meth:`__init__`
    (:meth:`new`) and which this process wrote under (:meth:`audit`, fed by ``sys.addaudithook``; :meth:`written`).
    Each is reported once."""

    def __init__(self, paths: Iterable[Path], unit_glob: str | None = UNIT_GLOB) -> None:
        self.paths = list(paths)
        self.unit_glob = unit_glob
        self.before = self._present()
        self.reported: set[Path] = set()
        self._wrote: set[Path] = set()

    def _present(self) -> set[Path]:
        found = {p for p in self.paths if os.path.lexists(p)}
        if self.unit_glob:
            found |= {Path(p) for p in glob.glob(self.unit_glob)}
        return found

    def _place(self, path: object) -> Path | None:
        """The watched place ``path`` lies in (itself, or the unit file), else None."""
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str | os.PathLike):
            return None  # a file descriptor, ":memory:"-like objects
        full = Path(os.path.abspath(os.fspath(path)))
        for place in self.paths:
            if full == place or place in full.parents:
                return place
        if self.unit_glob and fnmatch.fnmatch(str(full), self.unit_glob):
            return full
        return None

    def audit(self, event: str, args: tuple[object, ...]) -> None:
        """A ``sys.addaudithook`` hook: note the place a write event's path lies in. Never raises (an exception
        here would fail the audited call)."""
        if event not in WRITE_EVENTS:
            return
        try:
            if event == "open" and not (isinstance(args[2], int) and args[2] & _WRITE_FLAGS):
                return
            targets = args[:2] if event in ("os.rename", "os.symlink", "os.link") else args[:1]
            for target in targets:
                if (place := self._place(target)) is not None:
                    self._wrote.add(place)
        except Exception:  # noqa: BLE001 - the hook must never break the code it watches
            pass

    def written(self) -> list[Path]:
        """Places this process wrote under since the last call and not reported yet (sorted)."""
        fresh = sorted(self._wrote - self.reported)
        self._wrote.clear()
        self.reported |= set(fresh)
        return fresh

    def new(self) -> list[Path]:
        """Paths that exist now, did not when the run began and were not reported yet (sorted)."""
        fresh = sorted(self._present() - self.before - self.reported)
        self.reported |= set(fresh)
        return fresh


def _say(paths: list[Path], when: str) -> str:
    listing = "\n".join(f"  {p}" for p in paths)
    return (
        f"{when} wrote agenticdb's real places on this host (a test must use a temp home: --home, "
        f"storage.home, or the inherited $AGENTICDB_HOME):\n{listing}\n"
        "remove what the test made there after reading it — unless another process on this host made them while the "
        "test ran (scripts/demo.sh, agenticdb run as root without --home): the check sees paths, not who wrote them"
    )


def _appeared(paths: list[Path]) -> str:
    listing = "\n".join(f"  {p}" for p in paths)
    return (
        f"agenticdb's real places on this host appeared during the test run:\n{listing}\n"
        "no test in this pytest process wrote them: a process a test started (given an environment without "
        "$AGENTICDB_HOME) or another process on this host (scripts/demo.sh, agenticdb without --home, a parallel "
        "run) made them; read them before removing anything: they may hold that process's journal and sandbox"
    )


class HostHome:
    """The plugin: the session's temp home and the check of :func:`host_paths`."""

    def __init__(self) -> None:
        self.watch = HostPaths(host_paths())  # before $AGENTICDB_HOME moves: the real places
        sys.addaudithook(self.watch.audit)  # for the process's life (a hook cannot be removed): cheap when idle
        self.home = Path(tempfile.mkdtemp(prefix="agenticdb-test-home-"))
        self.saved = os.environ.get("AGENTICDB_HOME")
        os.environ["AGENTICDB_HOME"] = str(self.home)

    def close(self) -> None:
        if self.saved is None:
            os.environ.pop("AGENTICDB_HOME", None)
        else:
            os.environ["AGENTICDB_HOME"] = self.saved
        shutil.rmtree(self.home, ignore_errors=True)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        try:
            result = yield
        except BaseException as exc:  # a fixture's teardown failed: the finding goes with its error
            fresh = self.watch.written()
            if fresh and not isinstance(exc, KeyboardInterrupt | SystemExit):
                exc.add_note(_say(fresh, item.nodeid))
            raise
        fresh = self.watch.written()
        if fresh:
            pytest.fail(_say(fresh, item.nodeid), pytrace=False)
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        writer = session.config.get_terminal_writer()
        if wrote := self.watch.written():  # a session fixture's teardown
            writer.line("\n" + _say(wrote, "the test run"), red=True)
        if appeared := self.watch.new():
            writer.line("\n" + _appeared(appeared), red=True)
        if wrote or appeared:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def register(config: pytest.Config) -> None:
    """Install the session home and the check into this pytest run (from ``pytest_configure``)."""
    plugin = HostHome()
    config.add_cleanup(plugin.close)
    config.pluginmanager.register(plugin, "agenticdb-hosthome")
