"""The one place that builds components from the configuration and wires them together.

Nothing else reaches for globals: the CLI and the daemon call these builders, then hand the parts to
``TuningSession`` through its constructor.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from agenticdb.advice.types import AdviceParts
from agenticdb.config import Settings
from agenticdb.config.sections import TargetConfig
from agenticdb.dialect import family_of
from agenticdb.host.hardware import detect_hardware
from agenticdb.host.privileges import PrivilegeError, check_not_superuser
from agenticdb.invocation import command
from agenticdb.measure.hoststats import host_state
from agenticdb.models import Measurement, RoundOutcome, RuntimeState
from agenticdb.planner.base import Planner, PlannerError
from agenticdb.sandbox import SANDBOXES, sandbox_kind, sandbox_of
from agenticdb.store.faults import StorageError, cause_of
from agenticdb.store.journal import Journal
from agenticdb.store.memory import MemoryBook
from agenticdb.store.memory.central import attach_central, safe_url
from agenticdb.targets import dbms_target
from agenticdb.targets.base import Target
from agenticdb.targets.linux import LinuxTarget
from agenticdb.workload_kinds import kind_spec
from agenticdb.workloads import build_workload as _build
from agenticdb.workloads import connection_from_dsn
from agenticdb.workloads.base import Connection, Workload, WorkloadError

if TYPE_CHECKING:
    from agenticdb.loop.session import TuningSession
    from agenticdb.targets.linux import LinuxTarget

log = structlog.get_logger(__name__)


class SetupError(RuntimeError):
    """The configuration cannot be turned into working components (message says what to fix)."""


def sandbox_target_config(kind: str, home: Path) -> TargetConfig:
    """TargetConfig of the private sandbox ``kind`` (any name ``agenticdb.sandbox.sandbox_kind`` accepts)
    under ``home``.

    Raises:
        SetupError: an unknown kind (lists the accepted names), or the sandbox does not exist (tells the
            user the command that creates it).
    """
    try:
        kind = sandbox_kind(kind)
    except ValueError as exc:
        raise SetupError(f"--sandbox: {exc}") from exc
    info = sandbox_of(kind, home).info()
    if info is None:
        raise SetupError(f"no {kind} sandbox under {home}: run `{command(f'sandbox up {kind}', ('home',))}` first")
    return info.target_config()


NO_TARGET = (
    f"no target given: pass --target DSN or --sandbox {'|'.join(SANDBOXES)}, set [target] dsn in the --config "
    "file, or set AGENTICDB_TARGET__DSN (agenticdb never picks a server on its own)"
)


def require_dsn(cfg: Settings) -> str:
    """The target DSN, or SetupError: there is no default server to tune."""
    if not cfg.target.dsn:
        raise SetupError(NO_TARGET)
    return cfg.target.dsn


def build_target(cfg: Settings, cache: bool = True) -> Target:
    """The DBMS target of ``cfg.target`` (PostgreSQL, MariaDB or MySQL), built by its kind's factory.

    Args:
        cache: keep facts read once per server version under ``<home>/cache``; False writes nothing
            there (``rollback --dry-run``).

    Raises:
        SetupError: no DSN configured.
        ValueError: the DSN or the service section is invalid (names the key).
    """
    require_dsn(cfg)
    return dbms_target(cfg.target, cache_dir=cfg.storage.home / "cache" if cache else None)


def linux_target(
    cfg: Settings, data_dir: str | None = None, state_store: Callable[[str, str], None] | None = None
) -> LinuxTarget:
    """The Linux host as a target (``[os]`` root and devices; the data directory picks the data disks).

    The one place a LinuxTarget is built: the OS stage, crash reconciliation and ``agenticdb rollback
    --os`` all get theirs here, so they agree on the root and the devices.
    """
    return LinuxTarget(root=cfg.os.root, devices=cfg.os.devices or None, data_dir=data_dir, state_store=state_store)


def target_for_snapshot(cfg: Settings, snapshot_target: str) -> Target:
    """The target a journaled snapshot of kind ``snapshot_target`` restores on: the Linux host for
    "linux", else the configured DBMS."""
    return linux_target(cfg) if family_of(snapshot_target) == "linux" else build_target(cfg)


def check_privileges(cfg: Settings) -> None:
    """Refuse a superuser DSN unless ``policy.allow_superuser`` (agenticdb.host.privileges; issue 21).

    Raises:
        SetupError: the DSN connects as a superuser (the message names ``agenticdb setup-role``), or the
            server cannot be asked.
    """
    try:
        check_not_superuser(cfg.target.kind, require_dsn(cfg), cfg.policy.allow_superuser)
    except PrivilegeError as exc:
        raise SetupError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - psycopg/PyMySQL errors: report, never a traceback
        raise SetupError(f"cannot check the privileges of target.dsn: {exc}") from None


def build_workload(cfg: Settings, target: Target) -> Workload:
    """The benchmark of ``cfg.workload`` against the target's database; an observe-only kind
    (``KindSpec.observes_only``: live) through :func:`build_observing_workload`."""
    conn = connection_from_dsn(target.family, require_dsn(cfg), cfg.target.database)
    if cfg.target.sandbox == "postgres" and not kind_spec(cfg.workload.kind).observes_only:
        _sandbox_statements(cfg)
    if target.family == "postgresql":  # the statements' statistics are read where the workload runs (host.pgss)
        from agenticdb.loop.rootcause_step import workload_database  # lazy: start-up cost (loads the loop's roles)
        from agenticdb.targets.postgres import PostgresTarget  # lazy: start-up cost (loads 216 modules)

        if isinstance(target, PostgresTarget):
            target.database = workload_database(cfg)
    if kind_spec(cfg.workload.kind).observes_only:
        return build_observing_workload(cfg, conn)
    return _build(cfg.workload, conn)


def _sandbox_statements(cfg: Settings) -> None:
    """``tune --sandbox postgres``: the workload's database and pg_stat_statements in it, made by the sandbox's
    superuser (``sandbox.postgres.create_pg_stat_statements``): the tuning role may not create the extension,
    and a database other than the one ``sandbox up`` prepared would otherwise have none. Never raises: without
    it the statistics say why they were not measured (``agenticdb.host.pgss.unreadable``)."""
    import psycopg  # lazy: the PostgreSQL driver, for a PostgreSQL sandbox only

    from agenticdb.sandbox.postgres import PostgresSandboxInfo, create_pg_stat_statements  # lazy: sandbox only

    info = sandbox_of("postgres", cfg.storage.home).info()
    if not isinstance(info, PostgresSandboxInfo):
        return
    try:
        statuses = create_pg_stat_statements(info, cfg.target.database)
    except psycopg.Error as exc:
        log.warning("sandbox.pg_stat_statements", error=str(exc)[:200], reason="statement evidence not created")
        return
    log.info("sandbox.pg_stat_statements", statuses=statuses, reason="statement evidence in the workload's database")


def build_observing_workload(cfg: Settings, conn: Connection) -> Workload:
    """An observe-only workload (live: observation windows, agenticdb/workloads/live.py), its set-up
    checked first.

    Raises:
        SetupError: the statement statistics are missing (one line: what the DBA must change).
    """
    from agenticdb.workloads.livestats import LiveSetupError  # lazy: start-up cost (loads pymysql; 33 modules)

    if cfg.policy.allow_restart and cfg.policy.restart_window is None:
        # A live server serves an application: a restart drops its connections. Only dynamic and reload
        # changes, unless the DBA names a restart window (then the validator allows restarts inside it).
        cfg.policy.allow_restart = False
        log.info("live.no_restart", reason="workload live without policy.restart_window: restart changes are refused")
    workload = _build(cfg.workload, conn, live=cfg.live)
    try:
        workload.prepare()
    except LiveSetupError as exc:
        raise SetupError(str(exc)) from None
    except WorkloadError as exc:
        raise SetupError(f"workload {cfg.workload.kind}: {exc}") from None
    return workload


def build_os_target(cfg: Settings, target: Target, state_store: Callable[[str, str], None] | None) -> Target | None:
    """The Linux target for the OS stage (None when the stage is not enabled)."""
    if cfg.loop.stage == "dbms":
        return None
    return linux_target(cfg, data_dir=target.data_dir, state_store=state_store)


def host_state_source(cfg: Settings, target: Target) -> Callable[[], RuntimeState] | None:
    """Host statistics sampler (CPU, vmstat, diskstats, PSI) for bottleneck evidence."""
    device = detect_hardware(target.data_dir, measure_storage=False).data_device
    devices = cfg.os.devices or ([device] if device else None)
    return lambda: host_state(cfg.os.root, devices)


def build_planner(
    cfg: Settings,
    memory: MemoryBook,
    journal: Journal,
    session_id: str,
    round_of: Callable[[], int] = lambda: 0,
) -> Planner:
    """The configured planner; ``llm`` wraps the heuristic planner as its fallback.

    ``round_of`` tells which round an LLM call belongs to (for the accounting rows).
    """
    from agenticdb.planner.heuristic import HeuristicPlanner  # lazy: start-up cost (loads 22 modules)

    heuristic = HeuristicPlanner(min_gain=cfg.loop.min_gain)
    if cfg.planner.kind == "heuristic":
        return refining(cfg, heuristic)
    from agenticdb.planner.llm import LLMPlanner  # lazy: start-up cost (loads openai; 583 modules)

    def on_call(record) -> None:  # type: ignore[no-untyped-def]
        memory.record_llm_call(
            session_id,
            round_of(),
            record.model,
            record.prompt_tokens,
            record.completion_tokens,
            record.cached_tokens,
            record.latency_ms,
            record.cost_usd,
            record.ok,
            record.error,
        )
        journal.append(session_id, "llm.call", record.model_dump(mode="json"), round_of())

    def on_event(event: str, data: dict[str, Any]) -> None:
        journal.append(session_id, event, data, round_of())

    try:
        return refining(cfg, LLMPlanner(cfg.planner, fallback=heuristic, on_call=on_call, on_event=on_event))
    except PlannerError as exc:
        raise SetupError(str(exc)) from None


def refining(cfg: Settings, playbook: Planner) -> Planner:
    """``playbook`` followed by the refinement search (``agenticdb.planner.search``) when ``loop.search``."""
    if not cfg.loop.search:
        return playbook
    from agenticdb.planner.search import (  # lazy: start-up cost (loads optuna; 154 modules)
        RefiningPlanner,
        SearchSettings,
    )

    return RefiningPlanner(
        playbook, SearchSettings(max_knobs=cfg.loop.search_knobs, switch_after=cfg.loop.plateau_rounds)
    )


def check_planner(cfg: Settings) -> None:
    """Fail fast on a planner that cannot work (``planner.kind = "llm"`` without a model or an API key),
    before anything connects to the database. Makes no request to the endpoint.

    Raises:
        SetupError: the message names the missing setting and its environment variable
            (AGENTICDB_LLM_MODEL, OPENAI_API_KEY).
    """
    if cfg.planner.kind != "llm":
        return
    from agenticdb.planner.heuristic import HeuristicPlanner  # lazy: start-up cost (loads 22 modules)
    from agenticdb.planner.llm import LLMPlanner  # lazy: start-up cost (loads openai; 583 modules)

    try:
        LLMPlanner(cfg.planner, fallback=HeuristicPlanner(min_gain=cfg.loop.min_gain))
    except PlannerError as exc:
        raise SetupError(str(exc)) from None


def advice_parts() -> AdviceParts:
    """The builders ``advise``, ``apply`` and the approval desk use, passed in (advice is below ``app``)."""
    return AdviceParts(
        build_target=build_target,
        linux_target=linux_target,
        host_state_source=host_state_source,
        build_workload=build_workload,
        open_stores=open_stores,
    )


def open_stores(cfg: Settings) -> tuple[Journal, MemoryBook]:
    """Journal and Memory Book SQLite files (parents created).

    Raises:
        StorageError: the home folder or a file cannot be created, opened or written.
    """
    assert cfg.storage.journal_db is not None and cfg.storage.memory_db is not None
    try:
        cfg.storage.home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # raised as one line naming the folder (storefault.StorageError)
        raise StorageError(cfg.storage.home, "home folder", cause_of(exc), "create") from exc
    journal = Journal(cfg.storage.journal_db, key_file=cfg.storage.key_path())
    return journal, open_memory(cfg, journal)


def open_memory(cfg: Settings, journal: Journal | None = None) -> MemoryBook:
    """The local Memory Book, linked to the central one when ``storage.memory_url`` is set (issue 19):
    an unreachable central book is journaled once as ``memory.central_unreachable``."""
    assert cfg.storage.memory_db is not None
    book = MemoryBook(cfg.storage.memory_db, host=cfg.storage.host_label)
    url = cfg.storage.memory_url

    def unreachable(reason: str) -> None:
        if journal is not None and url:
            data = {"url": safe_url(url), "reason": reason, "fallback": "local cache", "host": book.host}
            journal.append(book.last_session or "memory", "memory.central_unreachable", data)

    return attach_central(book, url, unreachable)


def build_session(
    cfg: Settings,
    target: Target,
    workload: Workload,
    journal: Journal,
    memory: MemoryBook,
    on_round: Callable[[RoundOutcome], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    start_from: dict[str, object] | None = None,
    on_status: Callable[[str], object] | None = None,
    approve: Callable[[str, int, Any, Any], str | None] | None = None,
    remediate: Callable[[str, Any], dict[str, Any] | None] | None = None,
    on_baseline_run: Callable[[str, Measurement, str], object] | None = None,
) -> TuningSession:
    """A TuningSession with its planner, OS target (originals saved to the Memory Book and journal before
    the first write) and host statistics wired in."""
    from agenticdb.loop.session import TuningSession  # lazy: start-up cost (loads scipy; 612 modules)

    session = TuningSession(
        cfg,
        target,
        workload,
        planner=None,  # type: ignore[arg-type]  # set right below: it needs the session id
        journal=journal,
        memory=memory,
        on_round=on_round,
        should_stop=should_stop,
        start_from=start_from,
        on_status=on_status,
        approve=approve,
        remediate=remediate,
        on_baseline_run=on_baseline_run,
    )
    session.planner = build_planner(cfg, memory, journal, session.session_id, lambda: session.current_round)

    def store_original(name: str, value: str) -> None:
        memory.save_os_original(session.session_id, name, value)
        journal.append(session.session_id, "os.original", {"name": name, "value": value}, session.current_round)

    session.os_target = build_os_target(cfg, target, store_original)
    src = host_state_source(cfg, target)
    if src is not None:
        session.extra_state_sources = [src]
    from agenticdb.workloads.live import LiveWorkload  # lazy: start-up cost (loads pymysql; 34 modules)

    if isinstance(workload, LiveWorkload):  # the window's statement counters feed the diagnosis
        session.extra_state_sources.append(workload.runtime_state)
    return session
