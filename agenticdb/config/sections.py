"""The configuration's section models (one pydantic model per TOML section) and the value checks they
share (listen address, time windows). The loop section is in :mod:`agenticdb.config.loop_section`; the loader
and the cross-section checks are in :mod:`agenticdb.config`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.config import JsonDict

from agenticdb.dialect import MYSQL_SCHEMES, is_mysql_dsn
from agenticdb.redaction import redact
from agenticdb.rule_files import harmful_rule_ids
from agenticdb.workload_kinds import KIND_NAMES, first_run_defaults, kinds_help


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


def fraction(example: float, warn_from: float | None = 1.0) -> JsonDict:
    """``json_schema_extra`` of a setting that is a fraction, not a percent (``example`` 0.03 means 3 %).

    A value at or above ``warn_from`` is almost surely a percent typed as a number (``loop.min_gain = 3``
    meant 3 % and is read as 300 %): :func:`agenticdb.config.fraction_warnings` names the key, the value and
    the rule. None where such values are meant (a headroom of 1 = 100 %) or the field's upper bound refuses
    them; the bound's error then says the key is a fraction (``agenticdb.config.fraction_hint``).
    """
    return {"fraction": {"example": example, "warn_from": warn_from}}


def percent(example: float) -> JsonDict:
    """``json_schema_extra`` of a setting that is a percent, not a fraction (``example`` 10 means 10 %).

    The opposite trap of :func:`fraction`: a value in (0, 1) is almost surely a fraction typed where a
    percent belongs (``loop.disturbance_steal_pct = 0.1`` meant 10 % and is read as 0.1 %);
    :func:`agenticdb.config.percent_warnings` names the key, the value and what to write instead.
    """
    return {"percent": {"example": example}}


HOME_ORDER = (
    "storage.home, else $AGENTICDB_HOME, else /var/lib/agenticdb as root, else "
    "$XDG_DATA_HOME/agenticdb (~/.local/share/agenticdb)"
)
"""Where agenticdb's data dir is when ``--home`` is not given (:func:`default_data_home`), in words for help and
messages."""


def empty_path_rule(default: str) -> str:
    """Why a blank storage path is refused, and what leaving it out gives (``default``, in words): ``""`` is
    ``Path(".")``, the current directory. One wording for the config keys (``StorageConfig._not_empty``) and the
    ``--home`` option (``agenticdb.cli.journal_cmd.home_path``)."""
    return f"must be a path (empty is the current directory); leave it out for its default: {default}"


HOME_ENV_DEFAULT = "/var/lib/agenticdb as root, else $XDG_DATA_HOME/agenticdb (~/.local/share/agenticdb)"
"""Where the data dir is when neither ``storage.home`` nor ``$AGENTICDB_HOME`` is set, in words."""


class HomeEnvError(ValueError):
    """``$AGENTICDB_HOME`` is set but blank; the message names the variable, its value and the rule
    (:func:`empty_path_rule`). :func:`agenticdb.config.load_config` raises it again as a ``ConfigError``."""


def home_from_env() -> Path | None:
    """``$AGENTICDB_HOME`` as a path, or None when it is not set.

    Raises:
        HomeEnvError: the variable is set but empty or blank. ``if os.environ.get(...)`` took ``""`` for unset
            and the data silently went to the default home, while ``--home ""`` and ``storage.home = ""`` are
            refused (``Path("")`` is the current directory, so taking it as a path is no better).
    """
    value = os.environ.get("AGENTICDB_HOME")
    if value is None:
        return None
    if not value.strip():
        raise HomeEnvError(f"environment variable AGENTICDB_HOME = {value!r}: {empty_path_rule(HOME_ENV_DEFAULT)}")
    return Path(value)


def default_data_home() -> Path:
    """Per-user data dir: ``$AGENTICDB_HOME``, else ``/var/lib/agenticdb`` for root, else
    ``$XDG_DATA_HOME/agenticdb`` (``~/.local/share/agenticdb``).

    Raises:
        HomeEnvError: ``$AGENTICDB_HOME`` is set but blank (:func:`home_from_env`).
    """
    if (env := home_from_env()) is not None:
        return env
    if os.geteuid() == 0:
        return Path("/var/lib/agenticdb")
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "agenticdb"


class ServiceConfig(Section):
    """How the DBMS is started, stopped and checked.

    kind ``pg_ctl``: ``data_dir`` + ``bindir`` (+ ``os_user`` when running as root);
    ``mariadbd``: a private mariadbd started with ``defaults_file``; ``systemd``: ``unit``;
    ``command``: explicit ``start``/``stop``/``status`` shell commands; ``none``: restarts impossible.

    ``cgroup`` (pg_ctl and mariadbd kinds): a cgroup directory (e.g. ``/sys/fs/cgroup/db``) the server
    is started in, so a restart by agenticdb keeps the memory limit the server was confined with. A
    systemd unit does this itself (``MemoryMax=``); without one a restarted server would land in the
    agent's own cgroup. Kernel Documentation/admin-guide/cgroup-v2.rst: a process is moved by writing
    its pid to ``cgroup.procs``, and its children are born in the same cgroup.
    """

    kind: Literal["pg_ctl", "mariadbd", "systemd", "command", "none"] = "none"
    data_dir: str | None = None
    bindir: str | None = None
    os_user: str | None = None
    defaults_file: str | None = None
    unit: str | None = None
    start: str | None = None
    stop: str | None = None
    status: str | None = None
    start_timeout_s: float = 60.0
    log_file: str | None = None
    cgroup: str | None = None

    @field_validator("cgroup")
    @classmethod
    def _cgroup_dir(cls, v: str | None) -> str | None:
        if v is not None and not (Path(v) / "cgroup.procs").is_file():
            what = "not a cgroup directory (no cgroup.procs in it)" if Path(v).is_dir() else "no such directory"
            raise ValueError(
                f"target.service.cgroup = {v!r}: {what}; "
                "give the directory of the cgroup the server runs in, e.g. /sys/fs/cgroup/<name>"
            )
        return v

    @model_validator(mode="after")
    def _needs(self) -> ServiceConfig:
        need = {"systemd": ("unit",), "pg_ctl": ("data_dir", "bindir"), "command": ("start", "stop")}
        # kind "none" with a cgroup: the section of a config used with --sandbox, whose pg_ctl/mariadbd
        # service takes the cgroup over (cli.settings)
        if self.cgroup and self.kind in ("systemd", "command"):
            raise ValueError(
                f"target.service.cgroup applies to service kinds 'pg_ctl' and 'mariadbd', not {self.kind!r} "
                "(a systemd unit sets its own limits; a 'command' start can join a cgroup itself)"
            )
        missing = [k for k in need.get(self.kind, ()) if not getattr(self, k)]
        if missing:
            raise ValueError(
                f"service kind {self.kind!r} needs " + " and ".join(f"target.service.{k}" for k in missing)
            )
        return self


class TargetConfig(Section):
    """The database to tune. ``dsn`` is a libpq URI/keyword string for PostgreSQL or
    ``mysql://user:pass@host:port/db?unix_socket=...`` for MySQL/MariaDB."""

    kind: Literal["postgresql", "mariadb", "mysql"] = "postgresql"
    dsn: str | None = None  # no implicit target: a tool that restarts servers must be told which one
    database: str = "agenticdb_bench"
    service: ServiceConfig = Field(default_factory=ServiceConfig)
    option_file: str | None = Field(
        default=None, description="MySQL/MariaDB: the managed option file agenticdb writes ([mysqld])."
    )
    sandbox: Literal["postgres", "mariadb"] | None = None

    @model_validator(mode="after")
    def _dsn_matches_kind(self) -> TargetConfig:
        # None = no target chosen yet (given later by --target/--sandbox); a DSN must fit the kind.
        if self.dsn is None:
            return self
        dsn = self.dsn.strip()
        if self.kind == "postgresql":
            uri = dsn.startswith(("postgresql://", "postgres://"))
            keywords = "://" not in dsn and "=" in dsn  # libpq "host=... dbname=..." string
            if not (uri or keywords):
                raise ValueError(
                    f"target.dsn = {_safe(dsn)!r} does not fit target.kind = 'postgresql': expected a "
                    "postgresql:// URI or a libpq keyword string (host=... dbname=...)"
                )
        elif not is_mysql_dsn(dsn):
            raise ValueError(
                f"target.dsn = {_safe(dsn)!r} does not fit target.kind = {self.kind!r}: expected "
                f"mysql://user:pass@host:port/db[?unix_socket=...] (scheme one of {', '.join(MYSQL_SCHEMES)})"
            )
        return self


if TYPE_CHECKING:
    WorkloadKind: TypeAlias = str
else:
    WorkloadKind = Literal[KIND_NAMES]
"""The ``workload.kind`` values, in the order of the table ``agenticdb.workload_kinds.KINDS``: a Literal at
run time, so pydantic checks the value and ``--help`` lists the kinds (cli.help_model reads the Literal);
a plain str for mypy, which cannot read a Literal built from a table."""


class WorkloadConfig(Section):
    """Benchmark settings. ``scale`` is the pgbench scale, sysbench/YCSB rows per table, or TPC-H scale
    factor. ``scale``, ``clients``, ``duration_s`` and ``warmup_max_s`` default per ``kind`` to a first run
    of a few minutes (``agenticdb.workload_kinds.KINDS``; README "Per-workload defaults") unless
    the command line, the environment or the config file sets them.

    A measured OLTP run lasts ``warmup_max_s + duration_s`` seconds. Its steady window starts where the
    per-second TPS series becomes stable (MSER-5, docs/measurement.md), at most ``warmup_max_s`` seconds
    in, so the window is at least ``duration_s`` long; only the window is scored. ``warmup_s`` is a
    separate, unmeasured run before it (the executor doubles it after a restart, when caches are cold).

    ``objective``: ``tps_per_p95`` (default for OLTP, higher is better), ``tps`` (higher), ``p95`` or
    ``p99`` (ms, lower), ``total_time`` (s, lower; the OLAP default). See README "Which objective to
    choose".
    """

    kind: WorkloadKind = Field(default="pgbench", description=kinds_help())
    scale: float = 10  # > 0, checked with the whole Settings (see check_settings)
    tables: int = 4
    clients: int = Field(default=4, ge=1, description="client connections (at least 1)")
    threads: int = Field(default=2, ge=1)
    duration_s: float = Field(default=15.0, gt=0, description="seconds per measured run (> 0)")
    warmup_s: float = Field(
        default=0.0,
        ge=0,
        description="seconds of an unmeasured run before each measured run (0 = none: steady-state detection "
        "cuts the start-up transient; after a restart at least 3 s are run, caches being cold)",
    )
    warmup_max_s: float = Field(
        default=10.0,
        ge=0,
        description="upper bound (s) of the transient that steady-state detection may cut from the start "
        "of each measured run; the run is made this much longer (0 = score the whole run)",
    )
    command: str | None = None
    timeout_s: float = 600.0
    query_timeout_s: float = 120.0
    max_error_rate: float = Field(
        default=0.05,
        json_schema_extra=fraction(0.05),
        description="a run fails when failed transactions exceed this share of all (0.05 = 5 %)",
    )
    objective: Literal["tps_per_p95", "tps", "p95", "p99", "total_time"] | None = None

    @model_validator(mode="after")
    def _first_run_defaults(self) -> WorkloadConfig:
        # scale, clients, duration_s and warmup_max_s that no source set follow the kind
        # (agenticdb.workload_kinds.KINDS: tpch SF 0.1, sysbench 100,000 rows, ...). They are
        # written without marking them set, so a later --workload flag derives them again.
        for key, value in first_run_defaults(self.kind).items():
            if key not in self.model_fields_set:
                self.__dict__[key] = int(value) if key == "clients" else float(value)
        return self


class LiveConfig(Section):
    """``workload.kind = "live"``: observation windows on the application's own statements
    (agenticdb/workloads/live.py; README "Live mode"). Each window lasts ``workload.duration_s``."""

    database: str | None = Field(
        default=None,
        description="database whose statements are observed (PostgreSQL: pg_stat_statements must be created "
        "there; MariaDB: SCHEMA_NAME filter); None = the database of target.dsn (MariaDB: every schema)",
    )
    top_queries: int = Field(default=10, ge=1, description="statements (by baseline total time) in the objective")
    min_calls: int = Field(default=5, ge=1, description="calls a top statement needs in a window to count")
    min_weight: float = Field(
        default=0.5,
        gt=0,
        le=1,
        json_schema_extra=fraction(0.5, None),
        description="share of the baseline time the counted statements must carry",
    )
    max_extend: int = Field(default=3, ge=0, description="times a quiet window is extended before it is skipped")
    guard_max_slowdown: float = Field(
        default=1.0,
        gt=0,
        json_schema_extra=fraction(0.5, warn_from=10),  # 1 (= 100 %, twice as slow) is the default
        description="the guard reverts when the top statements' mean time passes (1 + this) × baseline",
    )
    guard_max_error_rate: float = Field(
        default=0.05,
        ge=0,
        le=1,
        json_schema_extra=fraction(0.05, None),
        description="the guard reverts when rolled back/failed transactions exceed this share",
    )
    guard_min_s: int = Field(default=1, ge=1, description="seconds of a window before the guard judges it")
    guard_min_mean_ms: float = Field(
        default=1.0,
        ge=0,
        description="the guard judges only statements whose mean in the baseline or the window is at least this "
        "(ms): a 0.02-ms "
        "statement measured 0.08 ms after jit = off in issue 38, a 4× 'slowdown' made of one preemption or "
        "cache miss (a scheduler time slice is milliseconds); such statements are too short to time reliably "
        "per second (judgement, measured on a busy 2-core host)",
    )
    turnover_max_s: float = Field(
        default=30.0,
        ge=0,
        description="seconds a window (other than a baseline one) waits for the application's sessions open when "
        "it was announced to close, so settings that reach new sessions only (MariaDB SET GLOBAL of a session "
        "variable) are in effect for all of its traffic; past it the window runs and its notes say it measured "
        "old and new sessions (0 = never wait). Not used on PostgreSQL: a reload reaches open sessions",
    )


class PolicyConfig(Section):
    """Safety policy (docs/safety.md); defaults are the safe choice."""

    durability: Literal["strict", "relaxed"] = "strict"
    allow_restart: bool = True
    restart_window: str | None = Field(
        default=None, description="'HH:MM-HH:MM' local time in which restarts are allowed; None = any time"
    )
    max_changes: int = Field(default=4, ge=1)
    max_step_factor: float = Field(default=4.0, gt=1)
    opening_step_bound: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="whether the opening's whole configurations (issue 36) are held to max_changes and "
        "max_step_factor like a round: 'auto' keeps the bound in live mode (a production workload) and drops "
        "it otherwise, 'on' always, 'off' never",
    )
    memory_fraction: float = Field(default=0.75, gt=0, le=1, json_schema_extra=fraction(0.75, None))
    disk_fraction: float = Field(default=0.5, gt=0, le=1, json_schema_extra=fraction(0.5, None))
    per_connection_work_mem_factor: float = Field(default=1.0, gt=0)
    allow_harmful: list[str] = Field(
        default_factory=list,
        description="ids of [[harmful]] rules (validators/*.toml) accepted as journaled risks, e.g. "
        "['linux.thp-always']; every other known-harmful value is refused",
    )
    capacity_headroom: float = Field(
        default=0.25,
        ge=0,
        le=10,
        json_schema_extra=fraction(0.25, None),  # 1 (= 100 %: twice the peak) is meant; the bound catches 25
        description="capacity settings (max_connections, …) are never lowered below the observed peak × (1 + this)",
    )
    mode: Literal["auto", "approve", "advise"] = Field(
        default="auto",
        description="daemon: auto applies its own trials; approve queues proposals and applies only what "
        "`agenticdb approve ID` allows; advise only proposes (docs/advice.md)",
    )
    allow_superuser: bool = Field(
        default=False,
        description="connect to the target as a database superuser (refused by default: create a limited "
        "role with `agenticdb setup-role`)",
    )
    commit_headroom: float = Field(
        default=0.05,
        ge=0,
        lt=1,
        json_schema_extra=fraction(0.05, None),
        description="vm.overcommit_memory=2: CommitLimit must exceed Committed_AS + the DBMS's planned memory "
        "+ this fraction of RAM",
    )

    @field_validator("restart_window")
    @classmethod
    def _window(cls, v: str | None) -> str | None:
        return None if v is None else check_window("policy.restart_window", v)

    @field_validator("allow_harmful")
    @classmethod
    def _known_harm(cls, v: list[str]) -> list[str]:
        known = harmful_rule_ids()
        unknown = [x for x in v if x not in known]
        if unknown:
            raise ValueError(
                f"policy.allow_harmful names {unknown}, which are not [[harmful]] rule ids; known: {sorted(known)}"
            )
        return v


class PlannerConfig(Section):
    """Planner choice. ``kind = "llm"`` needs ``base_url``/``api_key`` (or OPENAI_BASE_URL/OPENAI_API_KEY)
    and ``model`` (or AGENTICDB_LLM_MODEL). Prices in USD per 1M tokens."""

    kind: Literal["heuristic", "llm"] = "heuristic"
    base_url: str | None = None
    api_key: str | None = None
    api_key_file: Path | None = Field(
        default=None, description="file holding the API key (one line; keep it 0600); beats OPENAI_API_KEY"
    )
    api_key_credential: str = Field(
        default="agenticdb-llm-api-key",
        description="systemd credential name read from $CREDENTIALS_DIRECTORY (LoadCredential= in the unit)",
    )
    model: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 4
    round_deadline_s: float = 180.0
    temperature: float = 0.2
    response_format: Literal["json_schema", "json_object", "text"] = "json_schema"
    price_prompt_per_mtok: float = 0.0
    price_completion_per_mtok: float = 0.0
    price_cached_per_mtok: float = 0.0


class StorageConfig(Section):
    """Where the Memory Book and journal SQLite files live (default: the user's data dir)."""

    home: Path = Field(default_factory=default_data_home)
    memory_db: Path | None = None
    journal_db: Path | None = None
    # issue 19: a central Memory Book shared by a fleet (agenticdb/memory/central.py); None = local only.
    memory_url: str | None = Field(
        default=None, description="postgresql://... of a central Memory Book; the local SQLite file is its cache"
    )
    host_label: str | None = Field(
        default=None, description="this host's name in a shared Memory Book; default: the machine's hostname"
    )

    @field_validator("home", "memory_db", "journal_db", "journal_key_file", mode="before")
    @classmethod
    def _not_empty(cls, v: Any, info: ValidationInfo) -> Any:
        # "" would be Path("."): the current directory as the data dir, or a directory opened as a file
        # (`AGENTICDB_STORAGE__JOURNAL_DB=` passed validate-config, then `journal list` died in Path.with_suffix)
        if isinstance(v, str) and not v.strip():
            default = {
                "home": HOME_ORDER,
                "memory_db": "<home>/memory.db",
                "journal_db": "<home>/journal.db",
                "journal_key_file": "the journal file with suffix .key",
            }[str(info.field_name)]
            raise ValueError(empty_path_rule(default))
        return v

    @field_validator("memory_url")
    @classmethod
    def _memory_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL (the central Memory Book is PostgreSQL)")
        return v

    journal_key_file: Path | None = Field(
        default=None,
        description="HMAC key of the journal chain (created 0600 at first start; default: the journal file "
        "with suffix .key, i.e. <home>/journal.key); keep it apart from copies of the journal",
    )

    def key_path(self) -> Path:
        """``journal_key_file``, else the journal file's name with suffix ``.key``."""
        if self.journal_key_file is not None:
            return self.journal_key_file
        assert self.journal_db is not None  # filled in by _paths
        return self.journal_db.with_suffix(".key")

    @model_validator(mode="after")
    def _paths(self) -> StorageConfig:
        # Written without marking them set (as WorkloadConfig._first_run_defaults does): a later
        # storage.home (--home, a test's tmp dir) derives them again. Marked set, load_config's override
        # kept the files in the first home: a test that gave only storage.home wrote the host's
        # /var/lib/agenticdb (tests/hosthome.py).
        if self.memory_db is None:
            self.__dict__["memory_db"] = self.home / "memory.db"
        if self.journal_db is None:
            self.__dict__["journal_db"] = self.home / "journal.db"
        return self


class OSConfig(Section):
    """OS stage. ``root`` is the prefix for /proc/sys and /sys/block (a fake tree in tests)."""

    root: Path = Path("/")
    devices: list[str] = Field(default_factory=list, description="block devices; default: the data dir's")


class RootCauseConfig(Section):
    """Root causes a setting cannot fix (issue 40, ``agenticdb.rootcause``)."""

    enabled: bool = Field(default=True, description="look for stale statistics, missing indexes, lock chains, …")
    statements: list[str] = Field(
        default_factory=list,
        description="the workload's own SELECTs to EXPLAIN ANALYZE for plan evidence ({r} becomes 1); "
        "PostgreSQL 15 cannot explain pg_stat_statements' normalised texts",
    )


class RemediationConfig(Section):
    """Where approved remediation (ANALYZE, VACUUM, CREATE INDEX CONCURRENTLY) runs. The tuning role
    is not the tables' owner (PostgreSQL 15: those statements need the owner or a superuser), so without
    ``dsn`` — a DSN of the tables' owner — remediation stays advice."""

    dsn: str | None = Field(default=None, description="DSN of the tables' owner; unset: advice only")


class DaemonConfig(Section):
    """Long-lived service schedule."""

    run_on_start: bool = True
    interval_hours: float = Field(default=24.0, gt=0)
    windows: list[str] = Field(default_factory=list, description="'HH:MM-HH:MM' local times for sessions")
    monitor_interval_s: float = Field(default=60.0, gt=0)
    drift_threshold: float = Field(
        default=0.2,
        gt=0,
        json_schema_extra=fraction(0.2),
        description="a re-tune is due when the live read fraction moves by more than this (0.2 = 20 points)",
    )
    watchdog_s: float = Field(default=30.0, gt=0)
    lock_dir: Path | None = None
    approval_dir: Path | None = Field(
        default=None, description="queue directory of policy.mode approve/advise; default <home>/approvals"
    )
    approval_group: str | None = Field(
        default=None, description="OS group whose members may approve/reject (root always may); None: anyone"
    )
    proposal_ttl_s: float = Field(default=86400.0, gt=0, description="a proposal expires after this many seconds")
    approve_source: Literal["session", "advice"] = Field(
        default="session",
        description="policy.mode approve: 'session' runs the tuning session and waits before each trial; "
        "'advice' queues `agenticdb advise` recommendations and applies the approved ones (no benchmark)",
    )
    advice_observe_s: float = Field(default=5.0, ge=0, description="observation window of the daemon's advice (s)")
    # issue 19: Prometheus metrics (agenticdb/metrics.py); None = not served / not written.
    metrics_listen: str | None = Field(default=None, description="'127.0.0.1:9187': serve /metrics there")
    metrics_textfile: Path | None = Field(default=None, description="node_exporter textfile (*.prom) to rewrite")

    @field_validator("windows")
    @classmethod
    def _windows(cls, v: list[str]) -> list[str]:
        return [check_window(f"daemon.windows[{i}]", w) for i, w in enumerate(v)]

    @field_validator("metrics_listen")
    @classmethod
    def _metrics_listen(cls, v: str | None) -> str | None:
        if v is not None:
            parse_listen(v)
        return v


def _safe(dsn: str) -> str:
    """A DSN without its password (for messages; agenticdb.redaction.redact)."""
    return redact(dsn)


def parse_listen(text: str) -> tuple[str, int]:
    """``"127.0.0.1:9187"`` → ``("127.0.0.1", 9187)`` (``daemon.metrics_listen``).

    Raises:
        ValueError: not ``host:port`` with a port in 1..65535 (the message names the value and the rule).
    """
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ValueError(f"daemon.metrics_listen={text!r}: must be 'host:port' with a port in 1..65535")
    return host.strip("[]"), int(port)


def check_window(key: str, v: str) -> str:
    """Check a time window ``'HH:MM-HH:MM'`` (local time, may wrap midnight).

    Raises:
        ValueError: naming ``key``, the value and the broken part ("hour 25 is not 00-23").
    """
    parts = v.split("-")
    if len(parts) != 2:
        raise ValueError(f"{key} = {v!r}: expected 'HH:MM-HH:MM' (e.g. '01:00-05:00')")
    minutes: list[int] = []
    for part in parts:
        hm = part.strip().split(":")
        if len(hm) != 2 or not all(x.isdigit() for x in hm):
            raise ValueError(f"{key} = {v!r}: {part.strip()!r} is not HH:MM (expected 'HH:MM-HH:MM')")
        hh, mm = int(hm[0]), int(hm[1])
        if not 0 <= hh <= 23:
            raise ValueError(f"{key} = {v!r}: hour {hh} is not 00-23")
        if not 0 <= mm <= 59:
            raise ValueError(f"{key} = {v!r}: minute {mm} is not 00-59")
        minutes.append(hh * 60 + mm)
    if minutes[0] == minutes[1]:
        # in_window: start == end would be an empty window (the end minute is outside): never open
        raise ValueError(f"{key} = {v!r}: the window is empty (start equals end); for always, leave it unset")
    return v


def in_window(windows: str | Sequence[str] | None, now: datetime | None = None) -> bool:
    """True when ``now`` (local time, default: the current time) is inside one of ``windows``.

    ``windows`` is one ``'HH:MM-HH:MM'`` (``policy.restart_window``) or a list of them
    (``daemon.windows``); None or an empty list means always. A window whose end is before its start
    spans midnight ("22:00-02:00"); the end minute is outside.
    """
    if not windows:
        return True
    now = now or datetime.now()
    minute = now.hour * 60 + now.minute
    for window in [windows] if isinstance(windows, str) else windows:
        start_s, end_s = (p.strip() for p in window.split("-"))
        sh, sm = (int(x) for x in start_s.split(":"))
        eh, em = (int(x) for x in end_s.split(":"))
        start, end = sh * 60 + sm, eh * 60 + em
        if (start <= minute < end) if start <= end else (minute >= start or minute < end):
            return True
    return False
