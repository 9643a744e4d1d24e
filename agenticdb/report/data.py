"""``agenticdb report --format json``: the numbers of the Markdown report as one JSON object.

Each round carries what the auditor decided on (the ``judged`` journal event): the medians of the
candidate's and the best configuration's runs in the interleaved pairs, the paired estimate of the
gain with its interval, and the raw objective of every run (``candidate_runs`` / ``best_runs``).
``race`` is the opening race's journal event as written (``agenticdb.loop.race.race_table``: one row per
screened candidate with its name, knobs, objective, ``cut_off``; the leader, what was proven, notes), or
None when the session ran no opening.
"""

from __future__ import annotations

from typing import Any

from agenticdb.report.daemon_stop import daemon_stop


def _judged_by_round(events: list[Any]) -> dict[int, dict[str, Any]]:
    """The last ``judged`` event of each round (a round judged twice keeps its final decision)."""
    out: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.event == "judged" and e.round_no is not None:
            out[int(e.round_no)] = dict(e.data)
    return out


def _round(r: Any, judged: dict[str, Any] | None) -> dict[str, Any]:
    est = r.estimate
    return {
        "round": r.round_no,
        "stage": r.stage.value,
        "bottleneck": r.bottleneck.value,
        "changes": dict(r.changes),
        "candidate_median": r.objective,
        "best_median": r.best_objective,
        "gain": est.gain if est is not None else r.gain_vs_best,
        "gain_low": est.low if est is not None else None,
        "gain_high": est.high if est is not None else None,
        "pairs": est.pairs if est is not None else 0,
        "confidence": est.confidence if est is not None else None,
        "estimate": est.text if est is not None else None,
        "verdict": r.judged,
        "kept": r.kept,
        "decision": r.decision.value,
        "reason": r.reason,
        "candidate_runs": (judged or {}).get("candidate", []),
        "best_runs": (judged or {}).get("best", []),
        "rationale": r.proposal.rationale if r.proposal is not None else None,
        "evidence": list(r.proposal.evidence) if r.proposal is not None else [],
        "rejected": [f.model_dump(mode="json") for f in r.failed_checks],
        "failure": r.failure.model_dump(mode="json") if r.failure else None,
    }


def report_data(sid: str, meta: Any, events: list[Any], rounds: list[Any]) -> dict[str, Any]:
    """The session's summary, best configuration and rounds (see the module docstring).

    Args:
        sid: session id; ``meta``: the journal's session row; ``events``: its journal events;
        ``rounds``: its ``RoundOutcome`` records from the Memory Book (may be empty).
    """
    first: dict[str, dict[str, Any]] = {}
    for e in events:
        first.setdefault(e.event, e.data)
    start, end, base = first.get("session.start", {}), first.get("session.end", {}), first.get("baseline", {})
    judged = _judged_by_round(events)
    stopped = daemon_stop(events)  # the daemon's pseudo-session: no session.end, its clean stop says why
    return {
        "session": sid,
        "target": start.get("target", meta.target),
        "workload": start.get("workload", meta.workload),
        "status": end.get("status", meta.status),
        "reason": end.get("reason") or (stopped.reason if stopped is not None else None),
        "objective": base.get("objective_name"),
        "higher_is_better": base.get("higher_is_better"),
        "baseline_objective": end.get("baseline_objective", meta.baseline_objective),
        "baseline_runs": base.get("objectives", []),
        "noise_cv": base.get("noise_cv"),
        "best_objective": end.get("best_objective", meta.best_objective),
        "best_changes": end.get("best_changes") or end.get("best_config") or {},
        "root_cause": first.get("root_cause"),
        "race": next((dict(e.data) for e in reversed(events) if e.event == "race"), None),
        "rounds": [_round(r, judged.get(r.round_no)) for r in rounds],
    }
