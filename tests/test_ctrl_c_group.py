"""Ctrl-C at a terminal reaches the whole foreground process group (termios(3), ISIG): a real
``agenticdb tune`` on its own sandbox, started in a session of its own as a shell starts a job, gets
SIGINT sent to its whole process group, the way a terminal sends it.

- The benchmark tool runs in a group of its own, so the Ctrl-C reaches agenticdb alone: the baseline's
  run ends normally and the session stops after it, as documented (exit 130, "stop requested (signal)"); the
  first Ctrl-C says so ("stopping before the first round", not "after this round": the baseline is no round).
- In the opening's race the same Ctrl-C ends the screen in flight at once (a screen proves nothing without the
  proof, which will not follow): an interruption, no further screen or proof, the start back, exit 130; its
  message says so (not "after this round"), and the summary tells the stop reason once.
- A tool that a signal from outside ends anyway (here SIGINT sent to the tool's own group as well, as a
  service manager's stop signals every process of its unit) while the stop is requested is the stop's
  interruption: never a failure of the configuration, in the journal or in experience memory.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from agenticdb.sandbox.postgres import PostgresSandbox, PostgresSandboxInfo
from agenticdb.store.journal import Journal

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "agenticdb.cli"]


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTICDB_HOME": str(home)}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600, env=env, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="agenticdb-ctrlc-"))
    base.chmod(0o755)  # the postgres OS user traverses it
    r = _cli(base, "sandbox", "up", "postgres")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield base
    finally:
        _cli(base, "sandbox", "down", "postgres")


@pytest.fixture(scope="module")
def info(home: Path) -> PostgresSandboxInfo:
    i = PostgresSandbox(home).info()
    assert i is not None
    return i


def _settings(info: PostgresSandboxInfo) -> list[tuple[str, str]]:
    with psycopg.connect(info.dsn, autocommit=True) as c:
        return [(str(n), str(s)) for n, s in c.execute("SELECT name, setting FROM pg_settings ORDER BY name")]


def _tune(home: Path, opening: bool, duration_s: int = 6) -> subprocess.Popen[str]:
    """``agenticdb tune`` in a session and process group of its own (a shell's job; its pgid is its pid)."""
    env = {**os.environ, "AGENTICDB_HOME": str(home), "AGENTICDB_LOOP__OPENING": str(opening).lower()}
    argv = ["tune", "--sandbox", "postgres", "--workload", "pgbench", "--rounds", "2", "--duration", str(duration_s)]
    argv += ["--warmup", "0", "--scale", "1", "--clients", "2", "--baseline-runs", "1", "--max-pairs", "1"]
    return subprocess.Popen(
        [*CLI, *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _measured_pgbench(proc: subprocess.Popen[str]) -> psutil.Process | None:
    """A measured pgbench run (``-T``, not the data load) agenticdb started, if one runs now."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return None
    for child in children:
        try:
            if child.name() == "pgbench" and "-T" in child.cmdline():
                return child
        except psutil.Error:
            continue
    return None


def _session(journal: Journal, earlier: set[str]) -> str | None:
    new = [s.id for s in journal.sessions() if s.id not in earlier]
    return new[-1] if new else None


def _wait_for_run(proc: subprocess.Popen[str], home: Path, earlier: set[str], after_event: str) -> psutil.Process:
    """The measured pgbench run that starts once this session journaled ``after_event`` ('' = right away)."""
    journal = Journal(home / "journal.db")
    deadline = time.monotonic() + 400  # a loaded host takes long to load the data
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        sid = _session(journal, earlier)
        seen = sid is not None and (not after_event or any(e.event == after_event for e in journal.events(sid)))
        run = _measured_pgbench(proc) if seen else None
        if run is not None:
            return run
        time.sleep(0.2)
    pytest.fail(f"no measured pgbench run after {after_event or 'the start'}")


def _stop(proc: subprocess.Popen[str], also_tool: psutil.Process | None) -> str:
    """SIGINT to agenticdb's whole process group (a terminal's Ctrl-C); with ``also_tool``, to the tool's
    group as well (once: before the fix it was the same group). Returns the output."""
    groups = [os.getpgid(proc.pid)]
    if also_tool is not None:
        tool_group = os.getpgid(also_tool.pid)
        if tool_group not in groups:
            groups.append(tool_group)
    try:
        for group in groups:
            os.killpg(group, signal.SIGINT)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return out


def _nothing_failed(home: Path, sid: str) -> None:
    """No failure journaled, no failed round, no failed lesson in experience memory."""
    events = Journal(home / "journal.db").events(sid)
    failures = [e.data for e in events if e.event == "failure"]
    assert not failures, failures
    with sqlite3.connect(home / "memory.db") as db:
        lessons = [
            json.loads(r[0])["failed"]
            for r in db.execute("SELECT experience FROM experience WHERE session_id = ?", (sid,))
        ]
        rounds = [json.loads(r[0]) for r in db.execute("SELECT outcome FROM rounds WHERE session_id = ?", (sid,))]
    assert all(not failed for failed in lessons), lessons
    assert all(r["failure"] is None for r in rounds), [r["failure"] for r in rounds]


def _earlier(home: Path) -> set[str]:
    with Journal(home / "journal.db") as journal:
        return {s.id for s in journal.sessions()}


def test_ctrl_c_to_the_whole_group_during_the_baseline_stops_after_it(home: Path, info: PostgresSandboxInfo) -> None:
    """The user's Ctrl-C during the baseline: exit 130 with the stop reason, not "baseline measurement
    failed" because pgbench died of the same SIGINT (exit -2)."""
    before, earlier = _settings(info), _earlier(home)
    proc = _tune(home, opening=False)
    tool = _wait_for_run(proc, home, earlier, "")
    assert os.getpgid(tool.pid) != os.getpgid(proc.pid), "the benchmark tool shares agenticdb's process group"
    out = _stop(proc, None)
    assert proc.returncode == 130, out[-3000:]
    assert "stop requested (signal)" in out and "Traceback" not in out, out[-3000:]
    assert "stopping before the first round: the start finishes first" in out, out[-3000:]
    assert "after this round" not in out, out[-3000:]
    assert not psutil.pid_exists(tool.pid) or tool.status() == psutil.STATUS_ZOMBIE
    sid = _session(Journal(home / "journal.db"), earlier)
    assert sid is not None
    events = Journal(home / "journal.db").events(sid)
    assert any(e.event == "baseline" for e in events), "the baseline's run did not end normally"
    end = [e for e in events if e.event == "session.end"][-1].data
    assert end["status"] == "stopped", end
    assert end["reason"] == "stop requested (signal): ended after the baseline, before any round", end
    assert _settings(info) == before
    _nothing_failed(home, sid)


def test_a_tool_killed_from_outside_while_stopping_in_the_baseline_is_the_stop(
    home: Path, info: PostgresSandboxInfo
) -> None:
    """SIGINT reaches pgbench too (its own group signalled as well): the stop, told as such, exit 130."""
    before, earlier = _settings(info), _earlier(home)
    proc = _tune(home, opening=False)
    tool = _wait_for_run(proc, home, earlier, "")
    out = _stop(proc, tool)
    assert proc.returncode == 130, out[-3000:]
    assert "baseline measurement failed" not in out and "Traceback" not in out, out[-3000:]
    assert "stop requested (signal) during the baseline" in out, out[-3000:]
    sid = _session(Journal(home / "journal.db"), earlier)
    assert sid is not None
    end = [e for e in Journal(home / "journal.db").events(sid) if e.event == "session.end"][-1].data
    assert end["status"] == "stopped" and "stop requested (signal) during the baseline" in end["reason"], end
    assert _settings(info) == before
    _nothing_failed(home, sid)


def test_a_tool_killed_from_outside_while_stopping_in_an_opening_screen_is_no_failure(
    home: Path, info: PostgresSandboxInfo
) -> None:
    """The user's second report: the screen's run ended by the stop is an interruption, never the
    candidate's failure (journal, rounds, experience memory); the starting configuration is back."""
    earlier = _earlier(home)
    proc = _tune(home, opening=True)
    tool = _wait_for_run(proc, home, earlier, "verified")  # a screen's configuration is in effect
    out = _stop(proc, tool)
    assert proc.returncode == 130, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    sid = _session(Journal(home / "journal.db"), earlier)
    assert sid is not None
    events = Journal(home / "journal.db").events(sid)
    interrupted = [e.data for e in events if e.event == "run.interrupted"]
    assert interrupted and "while the session was stopping" in interrupted[0]["outside"], interrupted
    end = [e for e in events if e.event == "session.end"][-1].data
    assert end["status"] == "stopped", end
    assert not Journal(home / "journal.db").open_intents()  # the race's best (start or proven leader) is in effect
    _nothing_failed(home, sid)


def test_ctrl_c_to_the_whole_group_during_the_race_stops_it_at_once(home: Path, info: PostgresSandboxInfo) -> None:
    """The user's report: a Ctrl-C while the opening's race screened its first candidate let the race run its
    remaining screens and then the proof before the session noticed. Now the screen's run ends at once as the
    stop's interruption (journaled ``run.interrupted``, never a failure), no later screen or proof starts, the
    start is back (every setting as before), and the summary says the race was interrupted; exit 130.

    The runs last 30 s and the Ctrl-C comes as soon as the screen's pgbench is seen (polled every 0.2 s), so the
    run is always in flight when it arrives; the test waits for events, never for a time."""
    before, earlier = _settings(info), _earlier(home)
    proc = _tune(home, opening=True, duration_s=30)
    tool = _wait_for_run(proc, home, earlier, "verified")  # the first screen's configuration is in effect
    sid = _session(Journal(home / "journal.db"), earlier)
    assert sid is not None
    screened = [e.round_no for e in Journal(home / "journal.db").events(sid) if e.event == "proposal"]
    assert screened and screened[-1] is not None, screened
    screen = screened[-1]
    out = _stop(proc, None)  # a terminal's Ctrl-C: agenticdb's group only, the tool's group is its own
    assert proc.returncode == 130, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert f"the opening's race was interrupted in round {screen}" in out, out[-3000:]
    # the first Ctrl-C says what it does in the race (not "after this round"), and the stop reason is told once
    assert "stopping the opening's race now: a screen in flight ends at once" in out, out[-3000:]
    assert "stopping after this round" not in out, out[-3000:]
    assert out.count(f"the opening's race was interrupted in round {screen}") == 1, out[-3000:]
    assert not psutil.pid_exists(tool.pid) or tool.status() == psutil.STATUS_ZOMBIE
    events = Journal(home / "journal.db").events(sid)
    interrupted = [e for e in events if e.event == "run.interrupted"]
    assert [e.round_no for e in interrupted] == [screen], [e.data for e in interrupted]
    assert "agenticdb ended the run at the stop request" in interrupted[0].data["outside"], interrupted[0].data
    # no later screen and no proof: no proposal, application or measurement after the interrupted screen's round
    later = [(e.event, e.round_no) for e in events if e.round_no is not None and e.round_no > screen]
    assert not later, later
    assert [e.round_no for e in events if e.event == "proposal"] == screened
    assert not [e for e in events if e.event == "judged"]
    race = [e.data for e in events if e.event == "race"][-1]
    assert f"interrupted in round {screen}" in race["stopped"] and race["leader"] is None, race
    end = [e for e in events if e.event == "session.end"][-1].data
    assert end["status"] == "stopped" and f"race was interrupted in round {screen}" in end["reason"], end
    assert not Journal(home / "journal.db").open_intents()
    assert _settings(info) == before
    _nothing_failed(home, sid)
