"""Test isolation: no test writes agenticdb's real places on the host (its data home, config, units).

A pytest plugin (registered by tests/conftest.py). Two parts:

- **The default home is a session temp dir.** ``$AGENTICDB_HOME`` is set, for the pytest process and so for
  every process a test starts with the inherited environment, to an empty dir made for this run and removed
  at its end. Without it a test that forgets ``--home``/``storage.home`` uses the host's real home
  (``agenticdb.config.sections.default_data_home``: ``/var/lib/agenticdb`` as root, else
  ``~/.local/share/agenticdb``). The variable is overwritten, not defaulted: a value exported in the shell
  that runs the suite (say ``/var/lib/agenticdb`` from a service environment) is a real home too. A test of the
  resolution itself sets or removes the variable with ``monkeypatch``.
- **The host's places are checked.** :data:`HOST_PATHS` (and ``/etc/systemd/system/agenticdb*``) that did
  not exist when the run began and exist after a test error that test at teardown, naming each path (once);
  any that appear later (a session fixture's teardown) fail the run at its end. A place that existed before
  the run is not watched (the host's own agenticdb installation, if any, is not a test's doing).

Seen (2026-12-07): a root run of the whole suite left ``/var/lib/agenticdb`` with an empty journal.db,
journal.key and memory.db: the stores ``app.open_stores`` creates before ``tune`` finds its target unreachable.
"""

from __future__ import annotations

import glob
import os
import shutil
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


class HostPaths:
    """Which of ``paths`` (plus the matches of ``unit_glob``) appeared since :meth:`__init__`; each is
    reported once."""

    def __init__(self, paths: Iterable[Path], unit_glob: str | None = UNIT_GLOB) -> None:
        self.paths = list(paths)
        self.unit_glob = unit_glob
        self.before = self._present()
        self.reported: set[Path] = set()

    def _present(self) -> set[Path]:
        found = {p for p in self.paths if os.path.lexists(p)}
        if self.unit_glob:
            found |= {Path(p) for p in glob.glob(self.unit_glob)}
        return found

    def new(self) -> list[Path]:
        """Paths that exist now, did not when the run began and were not reported yet (sorted)."""
        fresh = sorted(self._present() - self.before - self.reported)
        self.reported |= set(fresh)
        return fresh


def _say(paths: list[Path], when: str) -> str:
    listing = "\n".join(f"  {p}" for p in paths)
    return (
        f"{when} created agenticdb's real places on this host (a test must use a temp home: --home, "
        f"storage.home, or the inherited $AGENTICDB_HOME):\n{listing}\n"
        "they did not exist when the run began; remove them after reading them"
    )


class HostHome:
    """The plugin: the session's temp home and the check of :func:`host_paths`."""

    def __init__(self) -> None:
        self.watch = HostPaths(host_paths())  # before $AGENTICDB_HOME moves: the real places
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
            fresh = self.watch.new()
            if fresh and not isinstance(exc, KeyboardInterrupt | SystemExit):
                exc.add_note(_say(fresh, item.nodeid))
            raise
        fresh = self.watch.new()
        if fresh:
            pytest.fail(_say(fresh, item.nodeid), pytrace=False)
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        fresh = self.watch.new()
        if fresh:
            session.config.get_terminal_writer().line("\n" + _say(fresh, "the test run"), red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def register(config: pytest.Config) -> None:
    """Install the session home and the check into this pytest run (from ``pytest_configure``)."""
    plugin = HostHome()
    config.add_cleanup(plugin.close)
    config.pluginmanager.register(plugin, "agenticdb-hosthome")
