"""Test doubles of agenticdb's OWN interfaces, for fast tests of the session's branches.

``InMemoryTarget`` implements ``agenticdb.targets.base.Target`` over a dict of knob values; it is not a
model of PostgreSQL (no SQL, no server): it lets a test reach the branches real servers rarely show —
a revert that does not stick, a restore that fails, a knob changed by another owner, a server that
goes down — deterministically and in milliseconds. ``ScriptedWorkload`` implements ``Workload`` with an
objective computed from the target's current values, and ``ScriptedPlanner`` implements ``Planner``
with a fixed list of proposals. Real-server tests (tests/test_tune_*.py, test_break_recovery.py,
test_restore_path.py) cover the same paths against PostgreSQL and MariaDB; these never replace them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Catalog,
    Change,
    Disturbance,
    KnobSpec,
    Layer,
    Measurement,
    NormalizedChange,
    Proposal,
    RuntimeState,
    Snapshot,
)
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.base import Planner, PlannerError
from agenticdb.targets.base import ApplyError, Target, TargetError, VerifyError
from agenticdb.workloads.base import Workload, WorkloadError, WorkloadTraits

#: A few PostgreSQL-spelled knobs (units and apply modes as pg_settings reports them).
KNOBS: dict[str, KnobSpec] = {
    "work_mem": KnobSpec(
        name="work_mem",
        vartype="integer",
        unit="kB",
        min_value=64,
        max_value=2147483647,
        apply=ApplyMode.reload,
        default="4MB",
    ),
    "random_page_cost": KnobSpec(
        name="random_page_cost", vartype="real", min_value=0, max_value=1.79769e308, apply=ApplyMode.reload, default="4"
    ),
    "autovacuum_naptime": KnobSpec(
        name="autovacuum_naptime",
        vartype="integer",
        unit="s",
        min_value=1,
        max_value=2147483,
        apply=ApplyMode.reload,
        default="1min",
    ),
    "effective_io_concurrency": KnobSpec(
        name="effective_io_concurrency",
        vartype="integer",
        min_value=0,
        max_value=1000,
        apply=ApplyMode.reload,
        default="1",
    ),
}
DEFAULTS = {"work_mem": "4MB", "random_page_cost": "4", "autovacuum_naptime": "1min", "effective_io_concurrency": "1"}


@dataclass
class InMemoryTarget(Target):
    """A test double of agenticdb's Target interface: knob values in a dict.

    Attributes:
        values: the values "in effect", in canonical spelling.
        up: whether the target answers (``available()``).
        restores: snapshots passed to ``restore``, in order (each restore path call shows here).
        failing_restores: the next N ``restore`` calls raise TargetError (a start that fails).
        sticky: ``{name: n}``: the next n restores leave that value as it is (a revert that does not
            take effect).
        crash_on: names whose apply takes the target down (a change the server cannot start with).
    """

    values: dict[str, str] = field(default_factory=lambda: dict(DEFAULTS))
    up: bool = True
    restores: list[Snapshot] = field(default_factory=list)
    failing_restores: int = 0
    sticky: dict[str, int] = field(default_factory=dict)
    crash_on: set[str] = field(default_factory=set)
    kind: str = "postgresql"

    def version(self) -> str:
        return "15.4"

    def catalog(self) -> Catalog:
        return Catalog(target=self.kind, version=self.version(), knobs=dict(KNOBS))

    def current_values(self, names: list[str] | None = None) -> dict[str, str]:
        if not self.up:
            raise TargetError("in-memory target is down")
        wanted = list(KNOBS) if names is None else names
        return {n: self.values[n] for n in wanted if n in self.values}

    def snapshot(self, names: list[str] | None = None, label: str = "") -> Snapshot:
        return Snapshot(target=self.kind, values=self.current_values(names), label=label)

    def apply(self, changes: list[NormalizedChange], mode: ApplyMode) -> bool:
        if not self.up:
            raise ApplyError("in-memory target is down")
        for c in changes:
            self.values[c.name] = c.value
        if any(c.name in self.crash_on for c in changes):
            self.up = False
            raise ApplyError(f"{[c.name for c in changes]}: the server did not come back", logs=["FATAL: test"])
        return mode == ApplyMode.restart

    def verify(self, changes: list[NormalizedChange]) -> dict[str, str]:
        now = self.current_values([c.name for c in changes])
        wrong = [c.name for c in changes if not self.values_equal(c.name, c.value, now.get(c.name, ""))]
        if wrong:
            raise VerifyError(f"not in effect: {wrong}")
        return now

    def restore(self, snapshot: Snapshot) -> None:
        self.restores.append(snapshot)
        if self.failing_restores > 0:
            self.failing_restores -= 1
            raise TargetError("restore failed: the server did not start", logs=["FATAL: still broken"])
        for name, value in snapshot.values.items():
            if self.sticky.get(name, 0) > 0:
                self.sticky[name] -= 1
                continue
            self.values[name] = value
        self.up = True

    def available(self) -> bool:
        return self.up

    def runtime_state(self) -> RuntimeState:
        return RuntimeState()


class VirtualClock:
    """A session's time-budget clock for tests (``TuningSession(clock=VirtualClock().now)``): seconds,
    monotonic, advanced only by the scripted workload's runs (each run's ``slow_runs`` seconds plus
    ``per_run_s``), never by the host. What a session decides on its budget is then the same on a quiet
    laptop and on a busy 2-core CI host: the session's own overhead costs no virtual time.

    ``epoch`` (wall seconds when the clock was made) + ``now()`` stamps each run's ``Measurement.taken_at``,
    so the gaps between runs that the auditor reads (``adoptable_prior``) are virtual too. ``per_run_s``
    defaults to 1 ms: no two runs end at the same instant (tests tell fresh runs apart by ``taken_at``).
    """

    def __init__(self, per_run_s: float = 0.001) -> None:
        self.t = 0.0
        self.per_run_s = per_run_s
        self.epoch = time.time()

    def now(self) -> float:
        """Virtual seconds since the clock was made."""
        return self.t

    def advance(self, seconds: float) -> None:
        """Spend ``seconds`` (≥ 0) of virtual time."""
        if seconds < 0:
            raise ValueError(f"a monotonic clock cannot go back ({seconds} s)")
        self.t += seconds


class ScriptedWorkload(Workload):
    """A test double of agenticdb's Workload interface: every run's objective is ``objective(values)`` of
    the target's current values (deterministic: the session's noise estimate is the 3 % floor).

    ``fail_runs``: run numbers (1-based, warm-ups excluded) that raise WorkloadError; ``disturb_runs``: run
    numbers measured as if a CPU hog had started mid-run (``Measurement.disturbance`` flagged);
    ``slow_runs``: run number → seconds that run takes (to spend a session's time budget in a round):
    virtual seconds of ``clock`` when the workload has one (the run advances it, with ``clock.per_run_s``),
    else real seconds slept; ``taken_at_offset``: run number → seconds added to its ``Measurement.taken_at``
    (a run that ended long after the one before it, as after an approval that waited).
    """

    name = "scripted"
    samples_host = False  # its runs sleep: the real host's load must not flag them (disturb_runs does)

    def __init__(
        self,
        target: InMemoryTarget,
        objective: Callable[[dict[str, str]], float],
        clock: VirtualClock | None = None,
    ) -> None:
        self.target = target
        self.clock = clock
        self.objective = objective
        self.runs = 0
        self.fail_runs: set[int] = set()
        self.disturb_runs: set[int] = set()
        self.slow_runs: dict[int, float] = {}
        self.taken_at_offset: dict[int, float] = {}

    def traits(self) -> WorkloadTraits:
        return WorkloadTraits("scripted", "oltp", 0.5, "uniform", 1, 1, "tps")

    def prepare(self) -> None:
        return None

    def warmup(self, seconds: float) -> None:
        return None

    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        self.runs += 1
        if self.runs in self.fail_runs:
            raise WorkloadError(f"scripted run {self.runs} failed", output="tool exited 1")
        if self.clock is not None:
            self.clock.advance(self.slow_runs.get(self.runs, 0.0) + self.clock.per_run_s)
            ended = self.clock.epoch + self.clock.now()
        else:
            time.sleep(self.slow_runs.get(self.runs, 0.0))
            ended = time.time()
        obj = self.objective(dict(self.target.values))
        disturbance = None
        if self.runs in self.disturb_runs:
            disturbance = Disturbance(
                samples=1,
                seconds=seconds,
                other_cpu_cores=1.0,
                other_cpu_spread=1.0,
                disturbed=True,
                reason="scripted: outside CPU load changed within the run",
            )
        return Measurement(
            workload=self.name,
            tps=obj,
            objective=obj,
            objective_name="tps",
            duration_s=seconds,
            disturbance=disturbance,
            taken_at=ended + self.taken_at_offset.get(self.runs, 0.0),
        )


class ScriptedPlanner(Planner):
    """A test double of agenticdb's Planner interface: the i-th call proposes ``script[i]`` (a change
    set, or an exception to raise); after the script, nothing is left (plateau)."""

    name = "scripted"

    def __init__(self, script: list[dict[str, str] | Exception], repairs: set[str] | None = None) -> None:
        self.script = list(script)
        self.calls = 0
        self.repairs = repairs or set()  # knobs each proposal claims to put back from a known bad start

    def propose(self, ctx: PlanningContext) -> Proposal:
        self.calls += 1
        if not self.script:
            return Proposal(
                bottleneck=Bottleneck.unknown, changes=[], plateau=True, rationale="script done", planner=self.name
            )
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return Proposal(
            bottleneck=Bottleneck.buffer_cache,
            layer=Layer.dbms,
            changes=[Change(name=k, value=v, rationale="scripted") for k, v in step.items()],
            rationale="scripted proposal",
            planner=self.name,
            repairs=[k for k in step if k in self.repairs],
        )


__all__ = ["InMemoryTarget", "PlannerError", "ScriptedPlanner", "ScriptedWorkload", "VirtualClock"]
