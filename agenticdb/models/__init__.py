"""Data types passed between the modules of the round (docs/architecture.md "Roles and the data each owns").

Every value that crosses a module boundary is one of these pydantic models. Units are stated per
field: sizes in bytes, times in milliseconds or seconds as named, throughput per second.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Literal

from pydantic import Field

from agenticdb.models.base import Strict as Strict
from agenticdb.models.host import Hardware as Hardware
from agenticdb.models.host import Observed as Observed


class Layer(StrEnum):
    """Which system a parameter belongs to."""

    dbms = "dbms"
    os = "os"


class ApplyMode(StrEnum):
    """How a change takes effect, from cheapest to most disruptive.

    dynamic: ``SET GLOBAL`` / a write to /proc/sys; reload: PostgreSQL SIGHUP (``pg_reload_conf()``);
    restart: the server must be restarted (PostgreSQL ``context = postmaster``, MySQL read-only vars).
    """

    dynamic = "dynamic"
    reload = "reload"
    restart = "restart"

    @property
    def rank(self) -> int:
        return {"dynamic": 0, "reload": 1, "restart": 2}[self.value]

    @staticmethod
    def strongest(modes: list[ApplyMode]) -> ApplyMode:
        """Most disruptive of ``modes`` (``dynamic`` for an empty list)."""
        return max(modes, key=lambda m: m.rank, default=ApplyMode.dynamic)


class Bottleneck(StrEnum):
    """Bottleneck hypotheses the planners attribute (docs/architecture.md "Roles")."""

    buffer_cache = "buffer_cache"
    wal_fsync = "wal_fsync"
    checkpoint = "checkpoint"
    io_queue = "io_queue"
    cpu = "cpu"
    lock_contention = "lock_contention"
    temp_spill = "temp_spill"
    connections = "connections"
    writeback = "writeback"
    memory_reclaim = "memory_reclaim"
    unknown = "unknown"


class Decision(StrEnum):
    """Auditor decision after a round."""

    continue_ = "continue"
    redirect = "redirect"
    switch_to_os = "switch_to_os"
    terminate = "terminate"


VarType = Literal["bool", "integer", "real", "enum", "string"]


class KnobSpec(Strict):
    """Metadata of one tunable parameter (knob, GUC, system variable, sysctl, block-queue file).

    ``unit`` is the server's base unit for numeric knobs: PostgreSQL ``pg_settings.unit`` ("8kB", "kB",
    "MB", "ms", "s", "min"), MySQL/MariaDB "B" for byte sizes, Linux the catalog unit. ``min_value`` and
    ``max_value`` are in that unit. ``apply`` is the cheapest way a change takes effect.
    """

    name: str
    layer: Layer = Layer.dbms
    vartype: VarType
    unit: str | None = None
    min_value: float | None = None
    max_value: float | None = None
    enum_values: list[str] | None = None
    apply: ApplyMode
    default: str | None = None
    description: str = ""
    category: str = ""
    path: str | None = None
    block_size: int | None = None
    source: str = ""
    option_file: bool | None = None
    """MySQL/MariaDB: whether the server accepts the variable in an option file (``mysqld --help --verbose``
    lists it). False: runtime only (``SET GLOBAL``); never written to the managed option file, where the
    next start would abort with "unknown variable". None: not applicable or not known."""


class Catalog(Strict):
    """The action space of one target: tunable knobs plus exclusions with the reason for each.

    ``unsupported`` holds names known to the catalog data but absent on this server/kernel, with why.
    """

    target: str
    version: str
    knobs: dict[str, KnobSpec] = Field(default_factory=dict)
    excluded: dict[str, str] = Field(default_factory=dict)
    unsupported: dict[str, str] = Field(default_factory=dict)
    facts: dict[str, float | str] = Field(default_factory=dict)
    """Read-only values the server's own checks depend on, by name, numbers in dimension-wide units
    (bytes, ms): PostgreSQL ``wal_segment_size`` (internal GUCs), MariaDB read-only variables
    (``innodb_page_size``), Linux device facts (``block.vda.hw_queue_depth``)."""
    unavailable_values: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Enum values the server's metadata lists but this build or configuration refuses, by knob then value
    (lower case), with why: MariaDB innodb_compression_algorithm=lzma without the provider_lzma plugin. They
    are not in ``KnobSpec.enum_values``."""

    def get(self, name: str) -> KnobSpec | None:
        return self.knobs.get(name)


class SeriesPoint(Strict):
    """One second of a measured run (docs/measurement.md).

    ``t_s`` is when the 1-s interval starts, in seconds from the start of the run; ``tps`` the
    transactions completed in it; ``latency_p95_ms``/``latency_p99_ms`` the percentiles of the
    latencies in it (None when the tool does not report them per second, or nothing completed);
    ``errors`` the failed transactions (and reconnects for sysbench) in it.
    """

    t_s: float = Field(ge=0)
    tps: float = Field(ge=0)
    latency_p95_ms: float | None = Field(default=None, ge=0)
    latency_p99_ms: float | None = Field(default=None, ge=0)
    errors: int = Field(default=0, ge=0)


class Disturbance(Strict):
    """CPU load on the host that was not ours during a measured run (docs/measurement.md).

    "Ours" is the database server's process tree, the benchmark tool's process tree and agenticdb's own
    process. Per 1-s sample: ``other = host busy CPU − ours`` in cores (1.0 = one CPU fully busy).

    ``other_cpu_cores`` is the mean of the per-second values, ``other_cpu_spread`` their p90 − p10 (a
    load that started or stopped mid-run makes it large), ``other_cpu_series`` the values themselves.
    ``ours_share_pct`` is our CPU share: the part (%) of their runnable time our threads spent on a CPU
    rather than waiting for one (mean of ``ours_share_series``, one value per sample, None where they
    were idle); ``ours_share_shift`` the largest factor by which its mean before and after some point of
    the run differ (``series.level_shift``; 1.0 = no change). On a saturated host an outside load shows
    there more than in other-CPU. ``steal_pct`` is the share of all CPU time the hypervisor gave to other guests (%),
    ``psi_cpu_some_pct`` the share of wall time some task waited for a CPU (/proc/pressure/cpu, %; None
    without PSI). ``disturbed``/``reason`` come from ``agenticdb.measure.disturbance.classify``.
    """

    samples: int = Field(ge=0)
    seconds: float = Field(ge=0)
    other_cpu_cores: float
    other_cpu_spread: float = Field(ge=0)
    other_cpu_series: list[float] = Field(default_factory=list)
    ours_cpu_cores: float = 0.0
    ours_share_pct: float | None = None
    ours_share_shift: float | None = None
    ours_share_series: list[float | None] = Field(default_factory=list)
    host_busy_cores: float = 0.0
    steal_pct: float = Field(default=0.0, ge=0)
    psi_cpu_some_pct: float | None = None
    disturbed: bool = False
    reason: str = ""
    world: list[str] = Field(default_factory=list)
    """What changed under the run that agenticdb did not do (restart, statistics reset, reload; issue 38)."""


class LiveQuery(Strict):
    """One of the baseline's top statements as seen in a live observation window (``workload.kind =
    "live"``). ``text`` is the normalised, literal-free statement text, shortened; ``weight`` its share of
    the top statements' baseline execution time; times in ms per call (``mean_ms`` None without calls);
    ``temp_bytes`` spilled to temporary files in the window (MariaDB: disk temp tables + sort merge
    passes, a count); ``read_blocks``/``hit_blocks`` shared blocks read from outside/inside the cache."""

    queryid: str
    text: str
    weight: float
    baseline_mean_ms: float
    calls: int = 0
    mean_ms: float | None = None
    temp_bytes: int = 0
    read_blocks: int = 0
    hit_blocks: int = 0


class Measurement(Strict):
    """Result of one workload run. Latencies in ms, durations in s.

    ``objective`` is the value the auditor compares: TPS/p95 (higher is better) for OLTP, total
    execution time in seconds (lower is better) for OLAP; ``higher_is_better`` says which.

    OLTP runs carry a per-second ``series``. ``tps``, the latencies and ``objective`` are then computed
    over the steady window only: it starts ``steady_start_s`` seconds into the run (found by MSER-5,
    docs/measurement.md) and lasts ``steady_s`` seconds. ``series_cv`` is the coefficient of variation
    of the per-second TPS inside the window, ``objective_se`` the batch-means standard error of
    ``objective`` (None when the window is too short for two batches, or for OLAP).
    ``transactions``, ``errors`` and ``duration_s`` cover the whole run, warm-up part included.
    ``disturbance`` is the host's outside CPU load during the run (set by the executor).
    """

    workload: str
    tps: float | None = None
    qps: float | None = None
    latency_mean_ms: float | None = None
    latency_p95_ms: float | None = None
    latency_p99_ms: float | None = None
    transactions: int = 0
    errors: int = 0
    duration_s: float = 0.0
    total_time_s: float | None = None
    per_query_s: dict[str, float] = Field(default_factory=dict)
    objective: float
    objective_name: str = "tps_per_p95"
    higher_is_better: bool = True
    taken_at: float = Field(default_factory=time.time)
    raw_tail: str = ""
    series: list[SeriesPoint] = Field(default_factory=list)
    steady_start_s: float | None = None
    steady_s: float | None = None
    series_cv: float | None = None
    objective_se: float | None = None
    disturbance: Disturbance | None = None
    cut_off: str | None = None
    """Why the run was stopped early as far worse than the best configuration (``agenticdb.measure.trial_limit``);
    its objective is then an estimate from the part that ran. None for a full run."""
    prewarm: str | None = None
    """What was loaded into the buffer cache after the restart before this run ("pg_prewarm: 18 relations,
    460.8 MiB in 2.1 s (all loaded)"), or why nothing could be ("prewarm not available: …"); None when no
    prewarm was due (no restart), or the DBMS restores its cache itself (``agenticdb.host.prewarm``)."""
    prewarm_s: float | None = None
    """The prewarm step's own wall time before this run (seconds, ``time.monotonic``: connecting, creating the
    extension, listing and loading the relations; at most ``executor.PREWARM_MAX_S`` of loading), set with
    ``prewarm``; None when no prewarm ran. The cost priors count it in a restart's warm-up
    (``loop.race_cost.CostBasis.prewarm_s``)."""
    live_queries: list[LiveQuery] = Field(default_factory=list)  # workload live: the top statements

    @property
    def disturbed(self) -> bool:
        """The host disturbed the run (``disturbance.disturbed``): its level says little."""
        return self.disturbance is not None and self.disturbance.disturbed


class RuntimeState(Strict):
    """A sample of runtime statistics: monotonically increasing ``counters`` and point-in-time ``gauges``.

    Counter names are namespaced by source, e.g. ``pg_stat_database.blks_read``,
    ``global_status.Innodb_buffer_pool_reads``, ``vmstat.pgscan_kswapd``.
    """

    counters: dict[str, float] = Field(default_factory=dict)
    gauges: dict[str, float] = Field(default_factory=dict)
    wait_events: dict[str, int] = Field(default_factory=dict)
    taken_at: float = Field(default_factory=time.time)
    unread: dict[str, str] = Field(default_factory=dict)
    """Sources whose counters this sample could not read → why (``pg_stat_statements``: "not created in
    database agenticdb_bench: …"), so what was not measured is said, never silent."""


class StateDelta(Strict):
    """Difference between two RuntimeState samples: counter deltas per second and the later gauges."""

    per_second: dict[str, float] = Field(default_factory=dict)
    totals: dict[str, float] = Field(default_factory=dict)
    gauges: dict[str, float] = Field(default_factory=dict)
    wait_events: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0
    unread: dict[str, str] = Field(default_factory=dict)
    """The later sample's ``RuntimeState.unread``: sources not measured, and why."""

    @staticmethod
    def between(before: RuntimeState, after: RuntimeState) -> StateDelta:
        """Counter deltas of ``after - before`` (negative deltas, from a restart, count as 0)."""
        seconds = max(after.taken_at - before.taken_at, 1e-6)
        totals = {k: max(v - before.counters.get(k, 0.0), 0.0) for k, v in after.counters.items()}
        return StateDelta(
            per_second={k: v / seconds for k, v in totals.items()},
            totals=totals,
            gauges=dict(after.gauges),
            wait_events=dict(after.wait_events),
            seconds=seconds,
            unread=dict(after.unread),
        )


class Snapshot(Strict):
    """Everything needed to put a target back: effective values and whole config files.

    ``files`` maps an absolute path to its content, or ``None`` when the file did not exist (restore
    then deletes it). ``values`` are the effective values of the tuned parameters as strings.
    """

    target: str
    values: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str | None] = Field(default_factory=dict)
    taken_at: float = Field(default_factory=time.time)
    label: str = ""


class RuntimeProfile(Strict):
    """What the Initializer learned about the target before the first round."""

    target: str
    dbms_version: str
    hardware: Hardware
    current_config: dict[str, str] = Field(default_factory=dict)
    service_status: str = "unknown"
    baseline: list[Measurement] = Field(default_factory=list)
    baseline_state: StateDelta | None = None
    noise_cv: float = 0.0


class Change(Strict):
    """One proposed parameter change as the planner states it (value in any spelling the validator
    normalises: "512M", "4 gb", 200, true)."""

    name: str
    value: str | int | float | bool
    rationale: str = ""


OPENING_PROOF = "proof of the race's leader"
"""How the rationale of the opening's proof begins (``agenticdb.loop.opening_run``): it tells the leader's proof
from the candidates' screens, whose proposals share ``stage = "opening"`` and ``planner = "opening:<name>"``."""


def opening_label(stage: object, planner: object, rationale: object = "") -> str:
    """Which of the opening's candidates a round is about, in words: ``opening screen of 'evidence'`` or
    ``opening proof of 'evidence'``; "" outside the opening (and for the one proposal standing for the whole
    opening in approve mode, ``planner = "opening"``). Takes a proposal's fields, so a journal payload (a dict)
    and a :class:`Proposal` are told the same way."""
    if stage != "opening" or not isinstance(planner, str) or not planner.startswith("opening:"):
        return ""
    step = "proof" if isinstance(rationale, str) and rationale.startswith(OPENING_PROOF) else "screen"
    return f"opening {step} of '{planner.removeprefix('opening:')}'"


class Proposal(Strict):
    """Diagnosis–action record produced by a planner (docs/architecture.md "The loop")."""

    bottleneck: Bottleneck
    layer: Layer = Layer.dbms
    changes: list[Change]
    intended_effects: list[str] = Field(default_factory=list)
    risks: list[str] = Field(default_factory=list)
    apply_requirement: ApplyMode = ApplyMode.dynamic
    evidence: list[str] = Field(default_factory=list)
    ruled_out: list[str] = Field(default_factory=list)
    rationale: str = ""
    planner: str = "heuristic"
    plateau: bool = False
    stage: Literal["playbook", "search", "opening"] = "playbook"
    """Which stage proposed it: the playbook (diagnosis → prescription), the refinement search
    (``agenticdb.planner.search``, model-based search after the playbook is used up) or the opening's race
    of whole configurations (``agenticdb.loop.race``: one screen each, then the leader's proof)."""
    repairs: list[str] = Field(default_factory=list)
    """Knobs this proposal puts back to the server's shipped default from a known bad start (a trap, or a
    value below the default under a floor rule). When the session's budget ends inside the decision and
    every change is such a repair measured better on the median, the round keeps it
    (``auditor.repair_kept``)."""
    releases: list[str] = Field(default_factory=list)
    """Knobs a trade move lowered to give back a cache measured as unused (the MyISAM key cache, the Aria
    page cache: never below twice the blocks in use; ``agenticdb.planner.trade``). A repair paid for only
    with such releases is still a repair for ``auditor.repair_kept``. Set by our planners only: the LLM
    planner's schema leaves it out and its replies cannot set it."""


class NormalizedChange(Strict):
    """A change in the target's canonical spelling.

    ``value`` is what is written to the server ("512MB", "on", "mq-deadline"); ``base_value`` is the
    numeric value in the knob's base unit (``KnobSpec.unit``) or None for non-numeric knobs;
    ``previous`` the effective value before the change.
    """

    name: str
    value: str
    base_value: float | None = None
    unit: str | None = None
    apply: ApplyMode
    layer: Layer = Layer.dbms
    previous: str | None = None
    runtime_only: bool = False
    """Applied with ``SET GLOBAL`` only: the variable has no option-file form on this server version, so
    it is not written to the managed option file and a restart by someone else loses it."""
    expected_base: float | None = None
    """What the server will report in the base unit when ``value`` is a special value it replaces by a
    computed one (PostgreSQL wal_buffers=-1 is reported as 1/32 of shared_buffers): verification compares
    with this instead of ``base_value``. None: compare with ``base_value``."""


class FailedCheck(Strict):
    """One failed validator check. ``check`` is the rule kind: stage, unknown, type, unit, enum, range,
    hardware, protected, dangerous, durability, conflict, step, apply, and (validators/*.toml)
    server_check (the server's own start-up/assignment checks beyond the published range), no_effect
    (the change cannot act on this host or in this mode: never measured), harmful (known to hurt a
    database host; ``policy.allow_harmful`` may accept it as a risk) and capacity (a capacity setting
    lowered below the observed peak plus headroom)."""

    check: str
    parameter: str
    value: str
    message: str
    source: str = ""
    rule_id: str = ""
    excess_bytes: float | None = None
    """``memory_budget`` refusals only: bytes by which the estimate exceeds the allowed memory, so a trade
    move (``agenticdb.planner.trade``) can give back no more than that from caches it knows the size of."""
    floor: float | None = None
    """``capacity`` refusals with an observed peak only: the least value of ``parameter`` the rule allows beside the
    rest of the set, in ``ResultingConfig.number``'s quantity (bytes, ms or plain); the opening's set repair sets it."""


class Verdict(Strict):
    """Validator output: ok, the normalised change set and the verified apply requirement."""

    ok: bool
    changes: list[NormalizedChange] = Field(default_factory=list)
    apply_requirement: ApplyMode = ApplyMode.dynamic
    failed: list[FailedCheck] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    accepted_risks: list[str] = Field(default_factory=list)
    read: dict[str, float] = Field(default_factory=dict)
    """Gauges read from the server for a rule of this check (``Observed.read``), by name: what it compared."""

    def feedback(self) -> str:
        """Failed checks as lines for the planner's next attempt."""
        return "\n".join(f"[{f.check}] {f.parameter}={f.value}: {f.message}" for f in self.failed)


FailurePhase = Literal["snapshot", "apply", "restart", "verify", "workload", "connect"]


class Failure(Strict):
    """What went wrong in the executor, with server log lines for recovery and the journal;
    ``server_reason`` is the server's own one-line reason found in them (``agenticdb.host.server_log``)."""

    phase: FailurePhase
    message: str
    logs: list[str] = Field(default_factory=list)
    server_reason: str = ""
    attempted: list[NormalizedChange] = Field(default_factory=list)
    outside: str = ""
    """Evidence that someone else restarted the server (``agenticdb.measure.worldwatch.outside_restart``): then the
    failure is not the candidate's and is never recorded as failed."""


class Execution(Strict):
    """Executor output for one trial."""

    applied: bool
    effective: dict[str, str] = Field(default_factory=dict)
    measurement: Measurement | None = None
    state_delta: StateDelta | None = None
    restarted: bool = False
    failure: Failure | None = None


class RecoveryResult(Strict):
    """Recovery output: ``action`` repaired (fixed in place) or restored (last safe snapshot back)."""

    action: Literal["repaired", "restored", "failed"]
    details: str
    service_available: bool
    verified: bool = False
    log_excerpt: list[str] = Field(default_factory=list)


class GainEstimate(Strict):
    """A keep/revert decision's estimate of the candidate's relative gain over the best configuration,
    with its interval (positive = better, whatever the objective's direction; 0.24 = +24 %).

    ``confidence`` is the overall confidence of the sequential test the interval belongs to; ``pairs``
    the interleaved pairs it rests on; ``text`` the human form ("+24 % [+11 %, +38 %], 5 pairs, 95 %");
    ``pair_gains`` each pair's gain, oriented like ``gain`` (candidate/best − 1 when higher is better, best/candidate
    − 1 when lower is better; the per-query statistic's ``exp(d) − 1`` for a query set), in pair order (the estimate
    is their geometric mean, which can differ in sign from the ratio of the medians).
    """

    gain: float
    low: float
    high: float
    pairs: int
    confidence: float
    text: str
    pair_gains: list[float] = Field(default_factory=list)


class RoundOutcome(Strict):
    """Consolidated record of one round (AgenticDB paper Table 4): what was believed, tried, seen, decided.

    ``objective`` is the median of the candidate's runs the decision rests on and ``best_objective`` the
    median of the best configuration's runs in the same interleaved pairs; ``gain_vs_best`` and
    ``estimate`` are the decision's paired estimate (not a ratio of those two medians).
    """

    session_id: str
    round_no: int
    stage: Layer
    bottleneck: Bottleneck
    proposal: Proposal | None = None
    verdict_ok: bool = False
    failed_checks: list[FailedCheck] = Field(default_factory=list)
    changes: dict[str, str] = Field(default_factory=dict)
    measurement: Measurement | None = None
    objective: float | None = None
    gain_vs_best: float | None = None
    estimate: GainEstimate | None = None
    best_objective: float | None = None
    judged: Literal["better", "worse", "tie", "undecided"] | None = None
    judged_reason: str = ""
    """Why the auditor judged so: the ``judged`` journal event's reason ("" when not judged, or older records)."""
    disturbed_pairs: list[str] = Field(default_factory=list)
    """The pairs the decision discarded because the host disturbed a run of them, one line each ("pair 2: best 2:
    steal time 30 %"; ``loop.auditor.Assessment.disturbed``); empty in records written before it."""
    kept: bool = False
    failure: Failure | None = None
    recovery: RecoveryResult | None = None
    interrupted: str = ""
    """Set when an outside restart interrupted the round (the evidence); such a round has no failure."""
    decision: Decision
    reason: str
    started_at: float = Field(default_factory=time.time)
    finished_at: float = Field(default_factory=time.time)

    @property
    def medians_gain(self) -> float | None:
        """The candidate's median over the best configuration's median in the same valid pairs (relative, positive =
        better, the direction from the run), when a decision ran pairs too few for an estimate; None with an
        estimate, or without paired medians (a screen has no best median)."""
        if self.estimate is not None or self.objective is None or self.best_objective is None:
            return None
        if self.objective <= 0 or self.best_objective <= 0:
            return None
        higher = self.measurement.higher_is_better if self.measurement is not None else True
        ratio = self.objective / self.best_objective
        return ratio - 1.0 if higher else 1.0 / ratio - 1.0

    @property
    def unpaired(self) -> bool:
        """A decision on pairs that kept no valid pair (judged, no median of valid pairs: every pair discarded as
        disturbed, or no pair started); its ``gain_vs_best`` is then its first run's against the best level, a run
        the decision discarded or never paired. An opening screen is no such decision: its one run is the race's
        result (``loop.opening_run`` sets its objective)."""
        return self.judged is not None and self.objective is None

    @property
    def counted_gain(self) -> float | None:
        """The gain the round measured (relative, positive = better): the paired estimate's; else the medians of
        valid pairs too few for an estimate (:attr:`medians_gain`); else an opening screen's one run
        (``gain_vs_best``, against the starting level) when it ran to the end undisturbed; None when the host
        disturbed the only run or the trial bound cut it off (its figure measured the host's other load, or a few
        seconds: the auditor counted no gain), for a decision with no valid pair (:attr:`unpaired`), or when
        nothing was measured. What ``journal show``'s decision line and the Memory Book's lessons quote (a fresh
        user read "gain vs best -2.4%" beside "no gain counted", and "-9.9%" for a round with no valid pair)."""
        if self.estimate is not None:
            return self.estimate.gain
        if (medians := self.medians_gain) is not None:
            return medians
        m = self.measurement
        if self.unpaired or (m is not None and (m.disturbed or m.cut_off)):
            return None
        return self.gain_vs_best

    @property
    def opening(self) -> bool:
        """A round of the opening's race (a screen or the leader's proof), not a diagnosis round."""
        return self.proposal is not None and self.proposal.stage == "opening"

    @property
    def opening_label(self) -> str:
        """``opening screen of 'evidence'`` / ``opening proof of 'evidence'``: the candidate this round of the
        opening is about (:func:`opening_label`); "" for any other round."""
        p = self.proposal
        return opening_label(p.stage, p.planner, p.rationale) if p is not None else ""
