"""What the root-cause detectors return: findings, ruled-out lines, remedies, and their thresholds.

A *finding* is a cause of slowness that no setting fixes (issue 40): stale statistics, a missing
index, vacuum held back, a lock chain, an idle-in-transaction session holding locks, InnoDB purge
lag. Each carries a score in [0, 1] (ramps between thresholds of ``catalogs/causes.toml``, like the
knob hypotheses of ``agenticdb.planner.diagnosis``), evidence lines read from the server, and the
remedies a DBA would run. Ids are stable: the same cause on the same object of the same server gives
the same id in every run, so ``advise`` output and approvals can refer to them.
"""

from __future__ import annotations

import hashlib
import tomllib
from enum import StrEnum
from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from agenticdb.resources import data_dir


class Cause(StrEnum):
    """Root causes a configuration change does not fix."""

    stale_statistics = "stale_statistics"
    missing_index = "missing_index"
    vacuum_held_back = "vacuum_held_back"
    lock_chain = "lock_chain"
    idle_in_transaction = "idle_in_transaction"
    purge_lag = "purge_lag"


SYMPTOM_KNOBS: dict[Cause, tuple[str, ...]] = {
    # Knobs a symptom-chasing tuner turns for these causes; none of them removes the cause (judgement,
    # DBA-Bench's "anchoring on the decoy"): lock timeouts only turn waits into errors, autovacuum
    # costs cannot remove tuples an open snapshot still sees, planner costs only hide a wrong estimate.
    Cause.lock_chain: ("deadlock_timeout", "lock_timeout", "innodb_lock_wait_timeout", "max_connections"),
    Cause.idle_in_transaction: ("deadlock_timeout", "lock_timeout", "innodb_lock_wait_timeout", "max_connections"),
    Cause.vacuum_held_back: ("autovacuum_vacuum_cost_limit", "autovacuum_vacuum_cost_delay", "autovacuum_naptime"),
    Cause.purge_lag: ("innodb_purge_threads", "innodb_purge_batch_size", "innodb_max_purge_lag"),
    Cause.stale_statistics: ("random_page_cost", "default_statistics_target", "enable_nestloop", "work_mem"),
    Cause.missing_index: ("work_mem", "random_page_cost", "effective_cache_size", "innodb_buffer_pool_size"),
}
"""Knobs not to propose while the cause dominates (its symptoms, not its cause)."""

SYMPTOM_LABELS: dict[Cause, tuple[str, ...]] = {
    Cause.lock_chain: ("lock_contention", "connections"),
    Cause.idle_in_transaction: ("lock_contention", "connections"),
    Cause.vacuum_held_back: ("io_queue", "buffer_cache", "cpu"),
    Cause.purge_lag: ("io_queue", "buffer_cache", "cpu"),
    Cause.stale_statistics: ("cpu", "io_queue", "buffer_cache", "temp_spill"),
    Cause.missing_index: ("cpu", "io_queue", "buffer_cache"),
}
"""Knob-side bottleneck labels (``agenticdb.models.Bottleneck`` values) the cause shows up as."""


class Remedy(BaseModel):
    """One statement a DBA would run. ``automatic``: agenticdb may run it after approval in approve mode
    (non-destructive, low-lock: ANALYZE, plain VACUUM, CREATE INDEX CONCURRENTLY); otherwise it is only
    advised, with ``lock_impact`` saying why."""

    model_config = ConfigDict(frozen=True)

    sql: str
    automatic: bool
    lock_impact: str
    verify: str = ""
    """What proves it worked (plan changed, waits gone, dead tuples removed)."""
    table: str | None = None


class Finding(BaseModel):
    """One root cause found on the server.

    ``score`` in [0, 1]; ``summary`` is the one line the session and the daemon print; ``evidence`` the
    numbers read, each saying where it came from; ``caused_by``: id of a finding upstream in a chain
    (a lock chain whose holder runs a statement slowed by stale statistics)."""

    id: str
    cause: Cause
    family: str
    subject: str
    score: float = Field(ge=0.0, le=1.0)
    summary: str
    evidence: list[str] = Field(default_factory=list)
    remedies: list[Remedy] = Field(default_factory=list)
    source: str = ""
    tables: list[str] = Field(default_factory=list)
    caused_by: str | None = None
    database: str = ""
    """The database the cause was found in (its remedy runs there); "" in records from before it was kept."""

    @property
    def symptom_knobs(self) -> tuple[str, ...]:
        """Knobs not to propose while this finding dominates."""
        return SYMPTOM_KNOBS[self.cause]

    def line(self) -> str:
        """``not a configuration problem: <summary> [<first evidence>]`` — the one line of tune/daemon."""
        ev = f" [{self.evidence[0]}]" if self.evidence else ""
        return f"not a configuration problem: {self.summary}{ev}"


class RuledOut(BaseModel):
    """A cause checked and dismissed, with the reason and its figures."""

    cause: Cause
    reason: str


class RootCauses(BaseModel):
    """Everything one detection pass found: findings (highest score first), ruled-out causes, and notes
    on the evidence used (which sources were available)."""

    family: str
    database: str = ""
    """The database probed: the server's own answer (``current_database()``, MariaDB ``DATABASE()``), else
    the one asked for; "" when none was (a MariaDB connection without a default schema)."""
    findings: list[Finding] = Field(default_factory=list)
    ruled_out: list[RuledOut] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    seconds: float = 0.0


def stable_id(*parts: str) -> str:
    """``RC`` + the first 10 hex digits of sha256 over ``parts`` (same cause, object and server → same id)."""
    return "RC" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:10]


def ramp(value: float, lo: float, hi: float) -> float:
    """0 at or below ``lo``, 1 at or above ``hi``, linear in between (``hi`` > ``lo``)."""
    if hi <= lo:
        return 1.0 if value >= hi else 0.0
    return max(0.0, min(1.0, (value - lo) / (hi - lo)))


class Threshold(BaseModel):
    """One threshold of ``catalogs/causes.toml``: value, unit and basis (manual / measurement / judgement)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    unit: str
    basis: str = Field(min_length=10)


REQUIRED = (
    "pg_analyze_base",
    "pg_analyze_scale",
    "pg_vacuum_base",
    "pg_vacuum_scale",
    "mdb_recalc_share",
    "min_table_rows",
    "stale_share_certain",
    "estimate_error_certain",
    "seq_read_share_certain",
    "index_kept_share_max",
    "holder_age_s",
    "dead_over_threshold_certain",
    "lock_wait_share_certain",
    "mdb_no_index_share",
    "mdb_history_certain",
    "dominant_score",
    "explain_timeout_s",
)


@lru_cache(maxsize=1)
def thresholds() -> dict[str, Threshold]:
    """The shipped thresholds by name.

    Raises:
        ValueError: catalogs/causes.toml lacks a required threshold or breaks the schema (names which).
    """
    raw = tomllib.loads((data_dir("catalogs") / "causes.toml").read_text()).get("threshold", {})
    out = {k: Threshold.model_validate(v) for k, v in raw.items()}
    missing = [k for k in REQUIRED if k not in out]
    if missing:
        raise ValueError(
            f"catalogs/causes.toml: threshold(s) {', '.join(missing)} missing (rule: every one is required)"
        )
    return out


def t(name: str) -> float:
    """The value of threshold ``name``.

    Raises:
        KeyError: no such threshold.
    """
    return thresholds()[name].value
