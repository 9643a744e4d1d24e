"""The heuristic planner's working data: a knob move, what the session's history rules out, and the
situation one proposal works from (shared by ``planner.heuristic`` and ``advice.advise``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agenticdb.models import Bottleneck, KnobSpec, RoundOutcome, StateDelta
from agenticdb.models.planning import PlanningContext
from agenticdb.planner.diagnosis import Hypothesis
from agenticdb.planner.playbook import HostFacts, Playbook


@dataclass
class Move:
    """One knob move the playbook, a floor rule or experience prescribes: the value (in the server's
    spelling), its spec, the bottleneck it serves, the value in effect and the rule's words and source."""

    name: str
    value: str | int | float
    spec: KnobSpec
    bottleneck: Bottleneck
    current: str | None
    effect: str
    risk: str
    reason: str
    source: str
    trap: bool = False  # a known harmful setting undone: a floor rule with revert_above/revert_if, or [[measured]]
    start: str = ""  # floor moves: wording.start_kind of the value in effect (default, below default, ...)
    measured: str = ""  # [[measured]] moves: the measured share that triggered the rule, for the summary


@dataclass
class History:
    """What the session (and retrieved experience) says about past changes (values ruled out, bounds,
    banned knobs, pushes); built by :meth:`HeuristicPlanner.history`."""

    forbidden: set[tuple[str, str]] = field(default_factory=set)
    banned: dict[str, str] = field(default_factory=dict)
    bound_up: dict[str, float] = field(default_factory=dict)
    bound_down: dict[str, float] = field(default_factory=dict)
    dead: set[tuple[str, str]] = field(default_factory=set)
    pushes: dict[str, int] = field(default_factory=dict)
    exhausted: dict[Bottleneck, str] = field(default_factory=dict)
    push_from: RoundOutcome | None = None
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # entries a measurement ruled out, said in the rationale
    # values only retrieved experience called ineffective (not tried in this session) → their note
    retrieved_ineffective: dict[tuple[str, str], str] = field(default_factory=dict)
    retried: list[str] = field(default_factory=list)
    # values this session measured and kept (any round, the opening's proof included): never a "bad start"
    kept: set[tuple[str, str]] = field(default_factory=set)


@dataclass
class Situation:
    """What one call of :meth:`HeuristicPlanner.propose` works from."""

    ctx: PlanningContext
    book: Playbook
    current: dict[str, str]
    facts: HostFacts
    family: str
    delta: StateDelta
    hyps: list[Hypothesis]
    hist: History

    @property
    def by_b(self) -> dict[Bottleneck, Hypothesis]:
        return {h.bottleneck: h for h in self.hyps}
