"""Live mode on a real private MariaDB (performance_schema statement digests): the set-up check, a
change of the traffic mix alone is a tie, the application's disk temporary tables are diagnosed and
tmp_table_size/max_heap_table_size raised and kept while its mix changes every 4 s, the guard reverts a
harmful candidate before its window ends, and windows start after the application's sessions turned
over (SET GLOBAL reaches new sessions only).

The application is ``tests/live_app_my.py`` in its own process; agenticdb sends no load. The faults are
far larger than this host's noise: the spill test's GROUP BY takes 1–2 s per call with its temporary
table on disk at the 16 MiB defaults and 0.2–0.4 s in memory at 64 MiB; the guard's candidate
(tmp_table_size = 0: every implicit temporary table on disk) makes the small GROUP BY about ten times
slower than its baseline, five times the guard's limit.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from llmstub import ScriptedLLMServer, chat_completion
from pytest_httpserver import HTTPServer

from agenticdb.config.sections import LiveConfig, WorkloadConfig
from agenticdb.loop import auditor
from agenticdb.measure.disturbance import DisturbanceThresholds
from agenticdb.measure.sequential import Noise, SequentialPolicy
from agenticdb.models import Measurement
from agenticdb.report.live import round_changes, round_windows
from agenticdb.sandbox.mariadb import MariaDBSandbox, MariaDBSandboxInfo
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import JournalEvent
from agenticdb.workloads.live import LiveWorkload
from agenticdb.workloads.livestats import MyStatReader
from agenticdb.workloads.registry import connection_from_dsn

pytestmark = pytest.mark.usefixtures("no_opening")  # diagnosis rounds, not the opening (tests/test_race.py)

APP = [sys.executable, str(Path(__file__).with_name("live_app_my.py"))]
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d")  # structlog lines (the superuser warning), not output

CLI = [sys.executable, "-m", "agenticdb.cli"]


@pytest.fixture(scope="module")
def my(mariadb_sandbox: MariaDBSandboxInfo, tmp_path_factory: pytest.TempPathFactory) -> MariaDBSandboxInfo:
    mix = tmp_path_factory.mktemp("mix") / "mix"
    mix.write_text("A")
    subprocess.run([*APP, mariadb_sandbox.socket, "0", "--mix-file", str(mix), "--setup"], check=True, timeout=120)
    return mariadb_sandbox


@pytest.fixture()
def mix_app(my: MariaDBSandboxInfo, tmp_path: Path) -> Iterator[Path]:
    mix = tmp_path / "mix"
    mix.write_text("A")
    app = subprocess.Popen([*APP, my.socket, "120", "--mix-file", str(mix)])
    try:
        yield mix
    finally:
        app.terminate()
        app.wait(timeout=30)


def workload(my: MariaDBSandboxInfo) -> LiveWorkload:
    conn = connection_from_dsn("mariadb", my.dsn + f"?unix_socket={my.socket}", "liveapp")
    return LiveWorkload(
        WorkloadConfig(kind="live"), LiveConfig(min_calls=2, database="liveapp"), MyStatReader(conn, "liveapp")
    )


class MixRuns:
    """Mix A in "candidate" windows, mix B in "best" windows; the configuration never changes."""

    def __init__(self, w: LiveWorkload, mix: Path) -> None:
        self.w, self.mix = w, mix
        self.by: dict[str, list[Measurement]] = {"candidate": [], "best": []}

    def run(self, config: auditor.Config, label: str) -> Measurement:
        self.mix.write_text("A" if config == "candidate" else "B")
        time.sleep(0.3)
        self.w.guard_armed = False  # nothing changed, nothing to revert (see test_live_pg.MixRuns)
        m = self.w.run(3)
        self.by[config].append(m)
        return m


def test_mariadb_mix_only_change_is_a_tie(my: MariaDBSandboxInfo, mix_app: Path) -> None:
    w = workload(my)
    w.prepare()
    runs = MixRuns(w, mix_app)
    base = runs.run("candidate", "baseline")
    screen = runs.run("candidate", "candidate")
    rules = auditor.DecisionRules(SequentialPolicy(min_pairs=2, max_pairs=3), Noise(), DisturbanceThresholds(), 0, 300)
    a = auditor.assess(screen, base.objective, runs, rules)
    assert a.verdict == "tie", a.reason
    assert a.estimate is not None and a.estimate.low < 0 < a.estimate.high
    # The mix did change: statements per second differ by more than 1.3× between A and B windows.
    qps_a = sum(m.qps or 0 for m in runs.by["candidate"]) / len(runs.by["candidate"])
    qps_b = sum(m.qps or 0 for m in runs.by["best"]) / len(runs.by["best"])
    assert qps_a > 1.3 * qps_b, (qps_a, qps_b)
    texts = {q.text for m in runs.by["best"] for q in m.live_queries}
    assert any("ORDER BY" in t and "?" in t for t in texts), texts  # digest text, literals replaced


def test_mariadb_without_statement_digests_exits_with_one_line(my: MariaDBSandboxInfo) -> None:
    home = Path(my.root).parent.parent  # the sandbox lives in HOME/sandbox/mariadb
    db = my.connect()
    try:
        db.cursor().execute(
            "UPDATE performance_schema.setup_consumers SET ENABLED = 'NO' WHERE NAME = 'statements_digest'"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTICDB_")}
        env["AGENTICDB_POLICY__ALLOW_SUPERUSER"] = "true"  # the sandbox fixture connects as root
        r = subprocess.run(
            [*CLI, "tune", "--home", str(home), "--sandbox", "mariadb", "--workload", "live", "--rounds", "1"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    finally:
        db.cursor().execute(
            "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME = 'statements_digest'"
        )
        db.close()
    assert r.returncode != 0
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip() and not LOG_LINE.match(ln)]
    assert len(lines) == 1, lines
    assert "performance_schema" in lines[0] and "statements_digest = NO" in lines[0]


# -- tuning beside the running application (its own private sandbox: the kept knobs stay there) ---------

TEMP_KNOBS = ("tmp_table_size", "max_heap_table_size", "sort_buffer_size")
GROUP = "GROUP BY `k`"
LIVE_ARGS = ("tune", "--sandbox", "mariadb", "--workload", "live", "--stage", "dbms", "--planner")


def run_cli(home: Path, env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    # The no_opening fixture's AGENTICDB_LOOP__OPENING passes through; every other setting comes from here.
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "AGENTICDB_")) or k == "AGENTICDB_LOOP__OPENING"
    }
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            **base,
            "AGENTICDB_HOME": str(home),
            "AGENTICDB_WORKLOAD__WARMUP_MAX_S": "0",
            "AGENTICDB_POLICY__ALLOW_SUPERUSER": "true",  # the sandbox connects as root
            "AGENTICDB_LIVE__DATABASE": "liveapp",
            **env,
        },
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="agenticdb-live-my-"))
    base.chmod(0o755)  # mariadbd runs as the mysql OS user and must traverse it
    r = run_cli(base, {}, "sandbox", "up", "mariadb")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield base
    finally:
        run_cli(base, {}, "sandbox", "down", "mariadb")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture()
def tuned(home: Path) -> Iterator[MariaDBSandboxInfo]:
    """The module's sandbox with the application's data, at the server defaults for the temp-table knobs
    when the test starts and ends."""
    i = MariaDBSandbox(home).info()
    assert i is not None
    if not getattr(tuned, "loaded", False):
        subprocess.run([*APP, i.socket, "0", "--setup"], check=True, timeout=300)
        tuned.loaded = True  # type: ignore[attr-defined]
    set_globals(i, dict.fromkeys(TEMP_KNOBS, "DEFAULT"))
    size_buffer_pool(i)
    yield i
    set_globals(i, dict.fromkeys(TEMP_KNOBS, "DEFAULT"))


def size_buffer_pool(i: MariaDBSandboxInfo) -> None:
    """The DBA sized the buffer pool: at least the playbook's floor (max(memory/64, 128 MiB), catalogs/
    playbook-mysql.toml), so the heuristic's first move is its diagnosis, not the sandbox's 64 MiB pool."""
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    chunk = 128 * 2**20
    want = -(-max(mem // 64, chunk) // chunk) * chunk
    set_globals(i, {"innodb_buffer_pool_size": str(want)})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        db = i.connect()
        try:
            cur = db.cursor()
            cur.execute("SELECT @@GLOBAL.innodb_buffer_pool_size")
            row = cur.fetchone()
        finally:
            db.close()
        if row is not None and int(row[0]) >= want:
            return
        time.sleep(0.5)
    raise AssertionError(f"innodb_buffer_pool_size did not reach {want}")


def set_globals(i: MariaDBSandboxInfo, values: dict[str, str]) -> None:
    db = i.connect()
    try:
        for name, value in values.items():
            db.cursor().execute(f"SET GLOBAL {name} = {value}")
    finally:
        db.close()


def globals_of(i: MariaDBSandboxInfo) -> dict[str, int]:
    db = i.connect()
    try:
        cur = db.cursor()
        cur.execute("SELECT " + ", ".join(f"@@GLOBAL.{k}" for k in TEMP_KNOBS))
        row = cur.fetchone()
    finally:
        db.close()
    assert row is not None
    return {k: int(v) for k, v in zip(TEMP_KNOBS, row, strict=True)}


def start_app(i: MariaDBSandboxInfo, seconds: float, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*APP, i.socket, str(seconds), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def stop_app(app: subprocess.Popen[str]) -> str:
    app.terminate()
    out, _ = app.communicate(timeout=60)
    return out


def app_counts(out: str) -> dict[str, int]:
    """The application's final line (``app: {...}``): statements, errors, connections."""
    (line,) = [ln for ln in out.splitlines() if ln.startswith("app: ")]
    counts: dict[str, int] = ast.literal_eval(line.removeprefix("app: "))
    return counts


def app_phases(out: str) -> list[tuple[str, dict[str, int]]]:
    """The application's phases in order: (mix name, statements by shape) from its ``phase X: {...}`` lines."""
    return [(m[1], ast.literal_eval(m[2])) for m in re.finditer(r"^phase (\w+): (\{.*\})$", out, re.M)]


def last_session(home: Path) -> tuple[str, list[JournalEvent]]:
    journal = Journal(home / "journal.db")
    sid = journal.sessions()[-1].id
    assert journal.verify().ok
    return sid, journal.events(sid)


def no_traceback(r: subprocess.CompletedProcess[str]) -> None:
    out = r.stdout + r.stderr
    assert "Traceback" not in out and "╭" not in out, out[-3000:]


@pytest.mark.slow
def test_mariadb_live_tune_diagnoses_disk_temp_tables_raises_and_keeps(home: Path, tuned: MariaDBSandboxInfo) -> None:
    before = globals_of(tuned)
    # The application reconnects every second (a pool with a connection lifetime): a SET GLOBAL reaches it.
    # Its mix changes every 4 s during the whole session (S: point reads and the GROUP BY; T: mostly sorts,
    # the GROUP BY at about half its rate), so every window sees another share of each mix.
    app = start_app(tuned, 600, "--mix", "S,T", "--mix-period", "4", "--reconnect", "1")
    try:
        r = run_cli(
            home,
            # Three pairs at least: the per-statement interval below is a t-interval over the pairs; with two
            # (df = 1, t = 12.7) it excludes zero only when both pairs' speed-ups agree closely (a 10x speed-up:
            # within about 40 %), which a loaded host does not guarantee. Up to five when three do not settle.
            # A run is disturbed when the outside CPU moves by more than 1.5 cores (default 0.5): the default
            # is sized for the 10-40 % effects of a CPU-bound benchmark (config.LoopConfig), this effect is 2-3x,
            # and a host load that starts and stops every few seconds (one busy loop, 3 s on, 2 s off) flagged
            # nearly every window: five repeated pairs made it a tie ("host too disturbed") in 100 s. Not
            # tests/noise.py's FAULT_FAR_BEYOND_DISTURBANCE (no flags at all, for 10x faults): a swing of most of
            # this host's two cores could halve a 2-3x effect, and it still counts.
            {
                "AGENTICDB_LIVE__MIN_CALLS": "2",
                "AGENTICDB_LOOP__MIN_PAIRS": "3",
                "AGENTICDB_LOOP__DISTURBANCE_CPU_CORES": "1.5",
            },
            *LIVE_ARGS,
            "heuristic",
            "--duration",
            "6",
            "--rounds",
            "1",
            "--baseline-runs",
            "2",
            "--max-pairs",
            "5",
        )
    finally:
        app_out = stop_app(app)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    no_traceback(r)
    assert app_counts(app_out)["connections"] > 10, app_out  # the application did turn its sessions over
    # The mix did change, several times: S phases without a sort, T phases with many.
    phases = app_phases(app_out)
    assert [n for n, _ in phases].count("S") >= 3 and [n for n, _ in phases].count("T") >= 3, app_out
    assert all(c["sort"] == 0 for n, c in phases if n == "S"), app_out
    assert sum(c["sort"] for n, c in phases if n == "T") > 10 * sum(c["group"] for n, c in phases if n == "T"), app_out
    sid, events = last_session(home)
    (decision,) = [e.data for e in events if e.event == "decision"]
    assert decision["bottleneck"] == "temp_spill" and decision["kept"] is True, decision
    after = globals_of(tuned)
    # Kept: the in-memory limit of an implicit temporary table, min(tmp_table_size, max_heap_table_size),
    # went up from the 16 MiB default and is in effect after the session.
    assert min(after["tmp_table_size"], after["max_heap_table_size"]) >= 4 * min(
        before["tmp_table_size"], before["max_heap_table_size"]
    ), (before, after)
    (judged,) = [e.data for e in events if e.event == "judged"]
    assert judged["verdict"] == "better" and judged["low"] > 0, judged  # the interval excludes zero
    # Per statement over the paired windows: the GROUP BY got faster, its interval excludes zero, and it
    # is the statement whose time changed most.
    measured = [e.data for e in events if e.event == "measured"]
    changes = round_changes(1, round_windows(events, 1))
    group = next(c for c in changes if GROUP in c.text)
    assert group.high is not None and group.high < 0, group
    assert changes[0].queryid == group.queryid
    rep = run_cli(home, {}, "report", sid)
    assert rep.returncode == 0, rep.stderr
    assert "application statements whose time changed most" in rep.stdout and group.queryid in rep.stdout
    # The diagnosis read the live statistics: the GROUP BY's disk temporary tables.
    evidence = " ".join(decision["proposal"]["evidence"])
    assert "Created_tmp_disk_tables" in evidence or "spill to temp files" in evidence, evidence
    # Windows after a change started once the sessions open before them had closed.
    notes = [n for d in measured for n in d["measurement"]["raw_tail"].split("; ")]
    assert any("application sessions open before it closed" in n for n in notes), notes


# -- the guard reverts a harmful candidate before its window ends ---------------------------------------

SMALL_GROUP = "FROM `small_groups`"
GUARD_MESSAGE = re.compile(
    r"live guard: the top queries' mean time is (?P<slowdown>[\d.]+)× their baseline after (?P<after>\d+) s "
    r"\(limit 2\.00× = 1 \+ live\.guard_max_slowdown; worst \w+ '(?P<worst>[^']+)': (?P<base_ms>[\d.]+) ms → "
    r"(?P<ms>[\d.]+) ms"
)


def scripted_llm(changes: list[dict[str, str]]) -> HTTPServer:
    """An OpenAI-compatible endpoint that answers every chat completion with one fixed proposal."""
    reply = {
        "bottleneck": "temp_spill",
        "layer": "dbms",
        "changes": changes,
        "intended_effects": ["none"],
        "risks": ["GROUP BYs on disk"],
        "apply_requirement": "dynamic",
        "evidence": ["scripted"],
        "rationale": "scripted harmful candidate",
    }
    body = chat_completion(json.dumps(reply))
    llm = ScriptedLLMServer()
    llm.start()
    llm.expect_request("/v1/chat/completions", method="POST").respond_with_json(body)
    return llm


def test_mariadb_guard_reverts_harmful_candidate(home: Path, tuned: MariaDBSandboxInfo) -> None:
    before = globals_of(tuned)
    # tmp_table_size = 16 kB (its block size, the smallest value above 0) puts the small GROUP BY's temporary
    # table on disk after a few rows: five to eight times its in-memory time at the 16 MiB default.
    llm = scripted_llm([{"name": "tmp_table_size", "value": "16384", "rationale": "deliberately harmful"}])
    env = {
        "OPENAI_BASE_URL": llm.url_for("/v1"),
        "OPENAI_API_KEY": "sk-test",
        "AGENTICDB_LLM_MODEL": "tuner-1",
        "AGENTICDB_POLICY__MAX_STEP_FACTOR": "2000",  # 16 MiB → 16 kB in one step
        "AGENTICDB_LIVE__MIN_CALLS": "1",
    }
    # The application reconnects every second: the SET GLOBAL reaches its sessions (SET GLOBAL of a
    # session variable acts on new sessions only).
    app = start_app(tuned, 240, "--mix", "H", "--reconnect", "1")
    try:
        r = run_cli(home, env, *LIVE_ARGS, "llm", "--duration", "6", "--rounds", "1", "--baseline-runs", "1")
    finally:
        app_out = stop_app(app)
        llm.assert_idle()
        llm.clear()
        llm.stop()
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    no_traceback(r)
    assert app_counts(app_out)["connections"] > 5, app_out  # sessions opened after the change saw it
    _, events = last_session(home)
    (applied,) = [e.data for e in events if e.event == "applied"]
    assert applied["changes"] == {"tmp_table_size": "16384"}, applied  # the harmful candidate was in effect
    (failure,) = [e.data for e in events if e.event == "failure"]
    # The figures: the slowdown, the limit and the worst statement, before the 6-s window ended.
    guard = GUARD_MESSAGE.match(failure["message"])
    assert guard is not None and failure["phase"] == "workload", failure["message"]
    assert float(guard["slowdown"]) > 2 and int(guard["after"]) < 6, failure["message"]
    assert SMALL_GROUP in guard["worst"] and float(guard["ms"]) > 2 * float(guard["base_ms"]), failure["message"]
    assert not [e for e in events if e.event == "measured" and e.round_no == 1]  # the window never ended
    (recovery,) = [e.data for e in events if e.event == "recovery"]
    assert recovery["action"] == "restored" and recovery["verified"] is True, recovery
    (decision,) = [e.data for e in events if e.event == "decision"]
    assert decision["kept"] is False, decision
    assert globals_of(tuned) == before  # reverted to the best configuration (the defaults)
