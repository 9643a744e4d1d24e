"""Advice sizing a DBA accepts (issue 39, agenticdb.advice.sizing): rule-only figures held to the
host-sized (PGTune) reference, evidence-backed ones may go beyond and say so, the worst case with
hash_mem_multiplier is a warning with its numbers. The real `advise` run is in test_advice.py."""

from __future__ import annotations

from test_validator import HW, PG, k

from agenticdb.advice.recommendation import Recommendation
from agenticdb.advice.sizing import hold_to_reference, worst_case_note
from agenticdb.config.sections import PolicyConfig
from agenticdb.models import ApplyMode, Layer, NormalizedChange
from agenticdb.planner.opening_types import Candidate
from agenticdb.units import parse_value

REF = Candidate(
    name="host-sized",
    changes={"work_mem": "30MB", "effective_cache_size": "18GB"},
    rationale="PGTune's whole configuration for this host: 24 GiB; more",
    sources={"work_mem": "PGTune: (memory − shared_buffers)/(3 × 200)", "effective_cache_size": "PGTune: 75 %"},
)


def _rec(knob: str, current: str, value: str, confidence: str = "rule") -> Recommendation:
    return Recommendation(
        id="R1",
        knob=knob,
        layer=Layer.dbms,
        current=current,
        recommended=value,
        apply=ApplyMode.reload,
        bottleneck="memory",
        rule=f"sizing:{knob}",
        reason="playbook",
        source="manual",
        confidence=confidence,  # type: ignore[arg-type]
        evidence=["temp files 2 GB in the window"] if confidence != "rule" else [],
    )


def test_rule_only_advice_is_held_to_the_reference_and_evidence_may_go_beyond() -> None:
    pg = PG.model_copy(deep=True)
    pg.knobs["effective_cache_size"] = k("effective_cache_size", unit="8kB", min_value=1, max_value=2147483647)
    wm, ecs = _rec("work_mem", "4MB", "120MB"), _rec("effective_cache_size", "4GB", "12GB")
    measured = _rec("work_mem", "4MB", "256MB", confidence="diagnosis")
    hold_to_reference([wm, ecs], REF, pg)
    assert wm.recommended == "30MB" and "no measured reason to go beyond" in wm.reason and "PGTune" in wm.reason
    assert any("playbook sizing gave 120MB" in e for e in wm.evidence)
    assert ecs.recommended == "18GB" and "dedicated host" in ecs.reason
    hold_to_reference([measured], REF, pg)
    assert measured.recommended == "256MB"
    assert any("beyond the host-sized reference 30MB" in e and "temp files" in e for e in measured.evidence)


def test_worst_case_warning_names_every_factor() -> None:
    pg = PG.model_copy(deep=True)
    pg.knobs["hash_mem_multiplier"] = k("hash_mem_multiplier", "real", min_value=1, max_value=1000, default="2")
    current = {"shared_buffers": "6GB", "max_connections": "50", "hash_mem_multiplier": "2", "work_mem": "4MB"}
    spec = pg.knobs["work_mem"]
    change = NormalizedChange(
        name="work_mem", value="150MB", base_value=parse_value("150MB", spec), apply=ApplyMode.dynamic, previous="4MB"
    )
    note = worst_case_note([change], pg, current, HW, PolicyConfig())
    assert note is not None and note.startswith("warning: worst case"), note
    assert "work_mem × 50 max_connections × hash_mem_multiplier 2 = 14.65 GiB" in note, note
    assert "memory limit 24.00 GiB = 18.00 GiB" in note, note
    small = change.model_copy(update={"value": "30MB", "base_value": parse_value("30MB", spec)})
    assert worst_case_note([small], pg, current, HW, PolicyConfig()) is None
