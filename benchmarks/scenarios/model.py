"""Scenarios of injected faults with known causes, loaded from ``benchmarks/scenarios/data/*.toml``.

One file per scenario (issue 22). Schema (all sections required unless marked optional)::

    name = "pg-commit-delay"              # unique; the file name without .toml
    about = "one line"
    kind = "wal"                          # fault kind for the summary rates (free text, short)

    [target]
    dbms = "postgres"                     # "postgres" (PostgreSQL 15) | "mariadb" (MariaDB 10.11)
    memory_limit_mib = 512                # optional: cgroup v1/v2 memory limit of the server
    setup_sql = ["CREATE TABLE …"]        # optional: run once after the workload's own prepare
    base_settings = { log_bin = "mysql-bin" }  # optional: part of the fault-free configuration too

    [workload]                            # agenticdb WorkloadConfig fields (kind, scale, clients, …)
    kind = "pgbench"

    [fault]
    settings = { commit_delay = "100000" }  # DBMS: ALTER SYSTEM / managed option file; OS: "block.<dev>.x"
    sql = ["DROP INDEX …"]                # optional: run after each pristine reset of the faulty state
    hold = ["SELECT … FOR UPDATE"]        # optional: run on a session left idle in its transaction
    source = "PostgreSQL manual 20.5.6 …"   # where a DBA met this configuration
    why = "what goes wrong"

    [expect]
    labels = ["wal_fsync"]                # Bottleneck values (agenticdb.models.Bottleneck) that count
    repair = ["commit_delay"]             # knobs whose change counts as the repair
    root_cause = "missing_index"          # instead of labels/repair: a cause no knob fixes (issue 40)
    remedy = ["CREATE INDEX"]             # SQL prefixes whose approved run counts as the repair
    decoy = "reverse"                     # optional: "misleading" | "reverse" (see ExpectSpec)
    within_pct = 15                       # success: final objective within this % of the fault-free one
    stage = "dbms"                        # stage of the tuning session: dbms | os | both

    [safety]                              # optional; these are the defaults
    durability = "strict"
    allow_restart = true
    restart_destructive = false           # true: a restart ends the held session — destructive

Knob values are written as the server spells them (``postgresql.auto.conf`` / my.cnf syntax).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agenticdb.models import Bottleneck
from agenticdb.rootcause import Cause

DATA_DIR = Path(__file__).parent / "data"
"""Where the scenario files live."""


class ScenarioError(ValueError):
    """A scenario file is missing or invalid (message names the file, the field and the rule)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetSpec(_Strict):
    """The private server: its kind, an optional memory limit (MiB), SQL run once after loading, and
    ``base_settings`` that belong to the fault-free configuration (e.g. a binary log the fault needs)."""

    dbms: Literal["postgres", "mariadb"]
    memory_limit_mib: int | None = Field(default=None, ge=128)
    setup_sql: list[str] = Field(default_factory=list)
    base_settings: dict[str, str] = Field(default_factory=dict)


class FaultSpec(_Strict):
    """The injected fault and where a DBA met it: a configuration (``settings``: knob → value), and/or
    SQL run on the workload's database after each pristine reset of the faulty state (``sql``: stale
    statistics, a dropped index; issue 40), and/or statements run on a session that stays open in its
    transaction (``hold``: an idle-in-transaction holder of locks and of the xmin horizon)."""

    settings: dict[str, str] = Field(default_factory=dict)
    sql: list[str] = Field(default_factory=list)
    hold: list[str] = Field(default_factory=list)
    source: str = Field(min_length=8)
    why: str = ""

    @model_validator(mode="after")
    def _non_empty(self) -> FaultSpec:
        if not (self.settings or self.sql or self.hold):
            raise ValueError("fault must name at least one knob (settings), statement (sql) or held statement (hold)")
        return self

    def os_settings(self) -> dict[str, str]:
        """The host parameters of the fault (``block.<dev>.<attr>`` or ``vm.*``/``kernel.*`` sysctls)."""
        return {k: v for k, v in self.settings.items() if k.startswith(("block.", "vm.", "kernel."))}

    def dbms_settings(self) -> dict[str, str]:
        """The DBMS knobs of the fault."""
        os_keys = self.os_settings()
        return {k: v for k, v in self.settings.items() if k not in os_keys}


class ExpectSpec(_Strict):
    """What counts: the bottleneck labels of a right diagnosis (a configuration cause) or the root cause
    (``root_cause``: an ``agenticdb.rootcause.Cause`` value, not a knob), the repair knobs or the remedy
    statements (``remedy``: SQL prefixes whose approved run counts), the success margin, and ``decoy``:
    "misleading" (a loud knob-looking symptom, the cause elsewhere) or "reverse" (a real knob fault with
    loud non-knob symptoms: acting on a root cause there is acting on the decoy)."""

    labels: list[Bottleneck] = Field(default_factory=list)
    repair: list[str] = Field(default_factory=list)
    root_cause: str | None = None
    remedy: list[str] = Field(default_factory=list)
    decoy: Literal["", "misleading", "reverse"] = ""
    within_pct: float = Field(default=15.0, gt=0, lt=100)
    stage: Literal["dbms", "os", "both"] = "dbms"

    @model_validator(mode="after")
    def _cause(self) -> ExpectSpec:
        if self.root_cause is None and not (self.labels and self.repair):
            raise ValueError("expect needs labels and repair (a configuration cause) or root_cause")
        if self.root_cause is not None and self.root_cause not in {c.value for c in Cause}:
            raise ValueError(f"expect.root_cause = {self.root_cause!r}: one of {', '.join(c.value for c in Cause)}")
        return self


class SafetySpec(_Strict):
    """Constraints of the session: durability strict, restarts allowed or not (inside the window)."""

    durability: Literal["strict"] = "strict"
    allow_restart: bool = True
    restart_destructive: bool = False
    """A restart would end the fault's held session (the blocker): it counts as a destructive action."""


class Scenario(_Strict):
    """One injected-fault scenario (see the module docstring for the file format)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    about: str
    kind: str
    target: TargetSpec
    workload: dict[str, Any]
    fault: FaultSpec
    expect: ExpectSpec
    safety: SafetySpec = SafetySpec()

    @property
    def family(self) -> str:
        """Rule-file family: "postgresql" or "mysql"."""
        return "postgresql" if self.target.dbms == "postgres" else "mysql"

    @property
    def dbms_label(self) -> str:
        """The server as the tables name it."""
        return "PostgreSQL 15" if self.target.dbms == "postgres" else "MariaDB 10.11"


def load_file(path: Path) -> Scenario:
    """Parse one scenario file.

    Raises:
        ScenarioError: unreadable, bad TOML, a field breaks the schema, or ``name`` differs from the file name.
    """
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"scenario file {path}: {exc}") from None
    try:
        scn = Scenario.model_validate(data)
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ScenarioError(f"scenario file {path}: {errs}") from None
    if scn.name != path.stem:
        raise ScenarioError(f"scenario file {path}: name = {scn.name!r} must equal the file name {path.stem!r}")
    return scn


def load_all(data_dir: Path = DATA_DIR) -> list[Scenario]:
    """Every scenario under ``data_dir``, sorted by name."""
    return [load_file(p) for p in sorted(data_dir.glob("*.toml"))]


def select(scenarios: list[Scenario], only: str | None) -> list[Scenario]:
    """The scenarios named in ``only`` (comma-separated names or prefixes ending in ``*``); all when None.

    Raises:
        ScenarioError: a name matches nothing (the message lists the known names).
    """
    if not only:
        return scenarios
    picked: list[Scenario] = []
    for want in (w.strip() for w in only.split(",") if w.strip()):
        hit = [s for s in scenarios if s.name == want or (want.endswith("*") and s.name.startswith(want[:-1]))]
        if not hit:
            raise ScenarioError(f"--only {want!r}: no such scenario; known: {', '.join(s.name for s in scenarios)}")
        picked += [s for s in hit if s not in picked]
    return picked
