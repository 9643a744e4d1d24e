"""`journal show daemon` and `journal list` tell a cleanly stopped daemon as stopped, with when and why (a
DBA's trial of issue 40 read "unfinished … (still running, or the process died)" after a clean
``daemon.stop``); "unfinished" stays for a daemon whose last start has no stop after it. Real journals,
written with the payloads agenticdb/daemon.py writes; the CLI reads them as a person would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agenticdb.store.journal import Journal

ENV = {**os.environ, "COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"}


def _show(home: Path) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "journal", "show", "daemon", "--home", str(home)],
        capture_output=True, text=True, timeout=120, env=ENV, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _status(home: Path) -> str:
    with Journal(home / "journal.db", read_only=True) as j:
        return next(s.status for s in j.sessions() if s.id == "daemon")


def _stopped_daemon(home: Path) -> str:
    """A daemon's journal: started, one approval proposed, stopped by SIGTERM; returns the stop's timestamp."""
    with Journal(home / "journal.db") as j:
        j.append("daemon", "daemon.start", {"config": "/etc/agenticdb/agenticdb.toml"})
        j.append("daemon", "approval.proposed", {"id": "Rabc", "mode": "approve"})
        j.append("daemon", "daemon.stop", {"signals": ["SIGTERM"]})
        return str(j.events("daemon")[-1].ts)


def test_a_cleanly_stopped_daemon_reads_as_stopped_and_a_running_one_as_unfinished(tmp_path: Path) -> None:
    stopped_at = _stopped_daemon(tmp_path)
    story = _show(tmp_path)
    assert "unfinished" not in story and "still running" not in story, story
    assert "Daemon stopped" in story and f"Stopped      {stopped_at}: by SIGTERM" in story, story
    assert _status(tmp_path) == "stopped"

    with Journal(tmp_path / "journal.db") as j:  # started again: runs (or died) until its next stop
        j.append("daemon", "daemon.start", {"config": None})
    story = _show(tmp_path)
    assert "the daemon has no daemon.stop event after its last daemon.start (still running, or the process died)" in (
        story
    ), story
    assert "Daemon stopped" not in story and _status(tmp_path) == "unfinished"

    with Journal(tmp_path / "journal.db") as j:  # it refused to go on: the reason, then the finally's stop
        j.append("daemon", "daemon.stop", {"reason": "reconcile failed: connection refused"})
        j.append("daemon", "daemon.stop", {"signals": []})
    story = _show(tmp_path)
    assert ": reconcile failed: connection refused" in story.split("Daemon stopped", 1)[1], story
    assert _status(tmp_path) == "stopped"


def _report(home: Path, *fmt: str) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "agenticdb.cli", "report", "daemon", "--home", str(home), *fmt],
        capture_output=True, text=True, timeout=120, env=ENV, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_report_of_a_cleanly_stopped_daemon_agrees_with_journal_show(tmp_path: Path) -> None:
    """`report daemon` said "the session has not ended (still running, or the process died)" after a clean stop
    that `journal show daemon` tells as "Daemon stopped": now it gives the same when and why; a daemon started
    again without a stop is still "not ended"."""
    stopped_at = _stopped_daemon(tmp_path)
    report = _report(tmp_path)
    assert "has not ended" not in report and "still running" not in report, report
    assert f"- **status:** stopped — the daemon stopped {stopped_at}: by SIGTERM" in report, report
    assert json.loads(_report(tmp_path, "--format", "json"))["reason"] == f"the daemon stopped {stopped_at}: by SIGTERM"

    with Journal(tmp_path / "journal.db") as j:  # started again: runs (or died) until its next stop
        j.append("daemon", "daemon.start", {"config": None})
    report = _report(tmp_path)
    assert "- **status:** unfinished\n" in report and "the session has not ended" in report, report
