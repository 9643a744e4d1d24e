"""The ``[loop]`` section: round bounds and the auditor's decision protocol (docs/measurement.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agenticdb.config.sections import Section, fraction, percent

#: Keys of earlier versions and what replaced them (a config file using one gets this in its error).
_RENAMED_LOOP_KEYS = {
    "confirm_runs": "use loop.max_pairs (interleaved pairs at most; the sequential test stops earlier when settled)",
    "noise_factor": "use loop.confidence (the sequential test's confidence, e.g. 0.95)",
}


class LoopConfig(Section):
    """Round loop bounds and the auditor's decision protocol (docs/measurement.md "Decisions").

    A candidate is compared with the best configuration on interleaved pairs of runs, by a sequential
    test (``agenticdb.measure.sequential``) that stops as soon as the decision is settled at ``confidence``:
    at least ``min_pairs``, at most ``max_pairs`` pairs or ``decision_budget_s`` seconds, after which an
    unsettled decision is a tie. ``min_gain`` is the smallest gain that counts.

    Host disturbance (docs/measurement.md "Host disturbance"), why the defaults:

    - ``disturbance_cpu_cores = 0.5``: on the 2-core reference host a steady outside load moved by under
      0.1 core (p90 - p10 of 1-s samples over a 20-s pgbench run) and one busy-loop process started
      mid-run moved it by 0.7-1 core. Half a core is a quarter of such a host: enough to change a
      CPU-bound benchmark's share of the CPUs by more than the 10-40 % effects being judged.
      A constant background load is not a disturbance: it is the same in both runs of a pair.
    - ``disturbance_share_ratio = 1.5``: on a saturated host an outside load can only take CPU from ours,
      so it shows less in other-CPU than in our CPU share (the part of their runnable time our threads
      got a CPU). On the reference host two busy loops started mid-run cut that share by a factor of
      2.3-2.8, while steady runs moved it by 1.1-1.4 (1.4 under a fluctuating load average of 6). A CPU-
      bound benchmark's TPS follows the share, so a factor of 1.5 is far beyond the effects judged.
    - ``disturbance_steal_pct = 10``: a dedicated VM shows ~0 % steal; at 10 % a tenth of the CPU time
      went to other guests, as large as the effects being judged, and it comes and goes with them.
    - ``max_disturbed_repeats = 4``: each repeat costs a pair; ``decision_budget_s`` bounds the decision's
      time anyway, and on a host where other jobs start and stop (the reference host under a load average
      of 6-10 flagged about one run in three) two repeats ended too many decisions as "host too disturbed".
    - ``baseline_budget_share = 0.3``: the baseline's extra runs and disturbed repeats stop after 30 % of
      the time budget, which leaves a short session (8 min, 1-min runs) the 4 runs of one paired decision;
      an 8-minute MariaDB session under 16-28 % steal time spent all of it on its baseline without it.
    """

    max_rounds: int = Field(default=10, ge=1)
    time_budget_s: float = Field(default=3600.0, gt=0)
    min_gain: float = Field(
        default=0.03,
        ge=0,
        json_schema_extra=fraction(0.03),
        description="smallest relative gain that counts (0.03 = 3 %)",
    )
    confidence: float = Field(
        default=0.95,
        gt=0.5,
        lt=1,
        json_schema_extra=fraction(0.95, None),
        description="confidence of every keep/revert decision, over all the looks of its sequential test",
    )
    baseline_runs: int = Field(
        default=3,
        ge=1,
        description="baseline runs measured at least (noise estimate); 2 when a third would leave the time "
        "budget no room for one decision",
    )
    baseline_max_runs: int = Field(
        default=5,
        ge=1,
        description="more baseline runs, up to this many, while their CV is above 15 % (default: 5, or exactly "
        "baseline_runs when only that is set)",
    )
    baseline_budget_share: float = Field(
        default=0.3,
        gt=0,
        le=1,
        json_schema_extra=fraction(0.3, None),
        description="share of time_budget_s after which the baseline takes no extra runs and repeats no "
        "disturbed run (its baseline_runs minimum is still measured)",
    )
    min_pairs: int = Field(default=2, ge=1, description="interleaved best/candidate pairs before any verdict")
    max_pairs: int = Field(
        default=5, ge=1, description="pairs after which an unsettled decision is a tie (the simpler config stays)"
    )
    decision_budget_s: float = Field(
        default=300.0,
        gt=0,
        description="seconds one keep/revert decision may take; a decision not settled by then is a tie",
    )
    plateau_rounds: int = Field(
        default=3,
        ge=1,
        description="playbook rounds in a row without a kept gain after which the search takes over (with "
        "loop.search; without it the session stops there)",
    )
    # Refinement stage (issue 14; agenticdb.planner.search): model-based search after the playbook.
    search: bool = Field(
        default=True,
        description="refine with Optuna TPE over the diagnosed bottlenecks' knobs once the playbook is used up",
    )
    search_patience: int = Field(
        default=4,
        ge=1,
        description="stop after this many measured search suggestions in a row stayed inside the noise band",
    )
    search_knobs: int = Field(default=3, ge=1, le=8, description="knobs in the search subspace")
    # Bounded bad trials (issue 14; agenticdb.measure.trial_limit): a candidate's first run far worse than the best
    # is stopped early and counted as worse (unless the host disturbed it).
    trial_cut_ratio: float = Field(
        default=0.5,
        ge=0,
        lt=1,
        json_schema_extra=fraction(0.5, None),
        description="OLTP: stop a trial whose steady median TPS falls below this × the best's (0 = never)",
    )
    trial_time_factor: float = Field(
        default=3.0,
        ge=0,
        description="OLAP: stop a trial's query set once it runs this × the best's query-set time (0 = never)",
    )
    # The opening (issue 36; agenticdb.loop.race): whole configurations raced before the diagnosis rounds.
    opening: bool = Field(
        default=True,
        description="race whole candidate configurations (host-sized, evidence, playbook limits, experience, "
        "LLM) once each before the diagnosis rounds, and prove the leader on fresh pairs",
    )
    opening_candidates: int = Field(default=3, ge=1, le=8, description="candidates the opening races (K)")
    race_time_factor: float = Field(
        default=1.5,
        gt=1,
        le=10,
        description="a race screen stops once it is this much worse than the best run so far: OLTP below "
        "1/k of its TPS, query sets past k × its time in total or per query (λ-Tune's bound)",
    )
    max_planner_retries: int = Field(default=2, ge=0)
    stage: Literal["dbms", "os", "both"] = "dbms"
    start_from: str | None = None
    reset_data: bool = Field(default=False, description="restore a pristine data copy before each run")
    latency_guard: float | None = Field(
        default=None,
        gt=0,
        json_schema_extra={**fraction(0.25), "unset": "off — decisions on the objective alone"},
        description="with any objective: a candidate whose p95 is worse than the best's by more than this "
        "fraction (0.25 = 25 %) is judged worse, whatever its TPS",
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in _RENAMED_LOOP_KEYS.items():
                if old in data:
                    raise ValueError(f"loop.{old} was replaced: {new}")
        return data

    @model_validator(mode="after")
    def _pairs(self) -> LoopConfig:
        # Derived bounds are written without marking them set (self.__dict__): a later flag (load_config's
        # overrides) derives them again. Marked set, `--baseline-runs 5` over a file's baseline_runs = 3 kept
        # the derived baseline_max_runs = 3 as if given and was refused.
        # An explicit baseline_runs without baseline_max_runs means exactly that many runs.
        if "baseline_runs" in self.model_fields_set and "baseline_max_runs" not in self.model_fields_set:
            self.__dict__["baseline_max_runs"] = self.baseline_runs
        # A bound left at its default follows the other one when that was set; two set bounds must agree.
        for low, high in (("min_pairs", "max_pairs"), ("baseline_runs", "baseline_max_runs")):
            lo, hi = getattr(self, low), getattr(self, high)
            if hi >= lo:
                continue
            given = self.model_fields_set
            if high not in given:
                self.__dict__[high] = lo
            elif low not in given:
                self.__dict__[low] = hi
            else:
                raise ValueError(f"loop.{high} = {hi} is below loop.{low} = {lo} (rule: {high} >= {low})")
        return self

    disturbance_cpu_cores: float = Field(
        default=0.5,
        gt=0,
        description="a run is disturbed when the CPU used outside agenticdb, the DBMS and the benchmark "
        "moves by more than this many cores within the run (p90 - p10 of its 1-s samples), or differs by "
        "more from the run it is paired with",
    )
    disturbance_share_ratio: float = Field(
        default=1.5,
        gt=1,
        description="a run is disturbed when our processes' CPU share (time on a CPU / time runnable) "
        "before and after some point of the run differs by more than this factor",
    )
    disturbance_steal_pct: float = Field(
        default=10.0,
        ge=0,
        le=100,
        json_schema_extra=percent(10),
        description="a run is disturbed when the hypervisor stole more than this share (%) of CPU time",
    )
    max_disturbed_repeats: int = Field(
        default=4,
        ge=0,
        description="how often a disturbed run is repeated before the decision is a tie ('host too disturbed')",
    )
