"""``agenticdb journal show``: a session's events told as a story, one block per round: evidence →
diagnosis → proposal → verdict → apply → measurement → decision, from the payloads documented in
:mod:`agenticdb.store.journal`. One small renderer per event kind; kinds without one print their payload.
"""

from __future__ import annotations

import io
import json
import statistics
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from agenticdb.cli.story_facts import (
    discarded_runs,
    late_event,
    remeasured_note,
    round_titles,
    start_gain_note,
)
from agenticdb.cli.story_facts import number as _num
from agenticdb.models import opening_label
from agenticdb.report.daemon_stop import daemon_stop, stop_text
from agenticdb.report.effects import decision_event_effect
from agenticdb.report.footnotes import Footnotes
from agenticdb.report.judged import disturbed_told, pairs_told, width_told
from agenticdb.report.labels import (
    noise_said,
    objective_label,
    objective_unit,
)
from agenticdb.rootcause.text import remediation_text, story_line
from agenticdb.store.journal_events import JournalEvent
from agenticdb.units.text import clip, counted

_NOTES: ContextVar[Footnotes | None] = ContextVar("story_footnotes", default=None)
"""The story being rendered's repeated sources (``report.footnotes``): set by :func:`render_story`."""

_SNAPSHOTS: ContextVar[set[tuple[Any, ...]] | None] = ContextVar("story_snapshots", default=None)
"""The safe snapshots the story being rendered has told whole (label, target, values, files): set by :func:`_story`."""


def _told(text: Any) -> str:
    """A source or rationale as the story prints it: a long clause told before is referred to by number."""
    notes = _NOTES.get()
    return str(text) if notes is None else notes.tell(str(text))


_DISCARDED: ContextVar[dict[float, str] | None] = ContextVar("story_discarded", default=None)
"""The story being rendered's discarded runs: ``Measurement.taken_at`` → why (set by :func:`render_story` from
the ``run.disturbed`` events, which come after the ``measured`` rows they discard)."""


def _line(console: Console, label: str, text: str, style: str = "bold") -> None:
    console.print(f"  [{style}]{label:<12}[/] {escape(text)}")


def _bullets(console: Console, items: list[Any]) -> None:
    for item in items:
        console.print(f"  {'':<12} • {escape(str(item))}")


def _changes_text(changes: list[dict[str, Any]]) -> list[str]:
    out = []
    for c in changes:
        text = f"{c.get('name')} = {c.get('value')}"
        if c.get("previous") is not None:
            text += f" (was {c['previous']})"
        if c.get("rationale"):
            text += f": {_told(c['rationale'])}"
        out.append(text)
    return out


def _baseline(console: Console, d: dict[str, Any]) -> None:
    runs = d.get("objectives") or [m.get("objective") for m in d.get("measurements", [])]
    runs = [r for r in runs if isinstance(r, (int, float))]
    median = d.get("objective") or (statistics.median(runs) if runs else None)
    cv = noise_said(d.get("noise_cv"), len(runs)) if runs else f"{_num((d.get('noise_cv') or 0) * 100, 1)}%"
    unit = objective_unit(d.get("objective_name"))
    _line(
        console,
        "Baseline",
        f"objective {_num(median)}{' ' + unit if unit else ''} (runs: "
        f"{', '.join(_num(r) for r in runs) or '-'}), noise CV {cv}; objective = "
        f"{objective_label(d.get('objective_name'))}",
    )
    unread = d.get("not_measured")
    _bullets(console, [f"{k} not measured: {v}" for k, v in unread.items()] if isinstance(unread, dict) else [])


def _profile(console: Console, d: dict[str, Any]) -> None:
    f = d.get("fingerprint") or {}
    if f:
        _line(
            console,
            "Profile",
            f"{f.get('dbms')} {f.get('version_major')}, {f.get('benchmark')} "
            f"({f.get('workload_class')}, read {f.get('read_fraction')}), scale {f.get('scale')}, "
            f"{counted(f.get('concurrency'), 'client')}, {counted(f.get('cpu_count'), 'CPU')}, "
            f"{f.get('memory_gib')} GiB",
        )


def _proposal(console: Console, d: dict[str, Any]) -> None:
    # an opening candidate's evidence is each change's source, told with the change below: not twice
    sourced = {f"{c.get('name')}: {c.get('rationale')}" for c in d.get("changes", []) if c.get("rationale")}
    evidence = [e for e in d.get("evidence", []) if str(e) not in sourced]
    if evidence or len(evidence) == len(d.get("evidence", [])):
        _line(console, "Evidence", "" if evidence else "(none given)")
        _bullets(console, [_told(e) for e in evidence])
    _line(
        console,
        "Diagnosis",
        f"{d.get('bottleneck')} ({d.get('layer', 'dbms')}, planner {d.get('planner', '?')}, stage "
        f"{d.get('stage', 'playbook')}): {_told(d.get('rationale', ''))}",
    )
    if d.get("ruled_out"):
        _bullets(console, [f"ruled out: {r}" for r in d["ruled_out"]])
    _line(
        console,
        "Proposal",
        f"{len(d.get('changes', []))} change(s), apply {d.get('apply_requirement', '?')}",
    )
    _bullets(console, _changes_text(d.get("changes", [])))
    if d.get("risks"):
        _bullets(console, [f"risk: {r}" for r in d["risks"]])


def _verdict(console: Console, d: dict[str, Any]) -> None:
    if d.get("ok"):
        _line(console, "Verdict", f"accepted, apply {d.get('apply_requirement', '?')}", "bold green")
        _bullets(console, _changes_text(d.get("changes", [])))
    else:
        _line(console, "Verdict", "rejected", "bold red")
        _bullets(
            console,
            [
                f"[{f.get('check')}] {f.get('parameter')}={f.get('value')}: "
                f"{f.get('message')}" + (f" (source: {f['source']})" if f.get("source") else "")
                for f in d.get("failed", [])
            ],
        )
    _bullets(console, [f"warning: {_told(w)}" for w in d.get("warnings", [])])
    read = ", ".join(f"{n}={_num(v, 0)}" for n, v in sorted((d.get("read") or {}).items()))
    _bullets(console, [f"read from the server for a capacity rule: {read}"] if read else [])


def _intent(console: Console, d: dict[str, Any]) -> None:
    snap = d.get("snapshot") or {}
    purpose = f"{d['purpose']} " if d.get("purpose") else ""
    label = f" {snap['label']!r}" if snap.get("label") else ""
    mode = f" {d['mode']}" if d.get("mode") else ""
    target, values, files = snap.get("target", d.get("target", "?")), snap.get("values", {}), snap.get("files", {})
    told, key = _SNAPSHOTS.get(), (snap.get("label"), target, json.dumps([values, files], sort_keys=True, default=str))
    if told is not None and key in told:  # the same snapshot again (a race's screens): said once (a trial: 6 times)
        _line(console, "Intent", f"{purpose}apply{mode}: safe snapshot{label} saved (as above)")
        return
    if told is not None:
        told.add(key)
    _line(
        console,
        "Intent",
        f"{purpose}apply{mode}: safe snapshot{label} of {target} saved "
        f"({counted(len(values), 'value')}, {counted(len(files), 'file')})",
    )


def _applied(console: Console, d: dict[str, Any]) -> None:
    """What was applied. An opening's screen or proof switches from the configuration in effect (the previous
    screen's) by what differs; its event's ``set`` and ``start`` (``Executor.apply``) tell the candidate's set
    against the starting configuration, which is what a DBA reads an "Applied" line as, with the switch after it."""
    changes = d.get("effective") or d.get("changes") or {}
    if isinstance(changes, list):
        changes = {c.get("name"): c.get("value") for c in changes if isinstance(c, dict)}
    how = " (server restarted)" if d.get("restarted") else ""
    whole, start = d.get("set"), d.get("start") or {}
    if isinstance(whole, dict):
        text = ", ".join(f"{k} {start.get(k) if start.get(k) is not None else '?'} → {v}" for k, v in whole.items())
        said = "the candidate's set against the starting configuration"
        if changes != whole:
            moved = ", ".join(k if k in whole else f"{k} (back to {start.get(k, v)})" for k, v in changes.items())
            said += (
                f"; the switch from the configuration in effect changed only {moved}"
                if moved
                else "; already in effect: nothing was switched"
            )
        _line(console, "Applied", f"{text or 'nothing'}{how} ({said})")
        return
    text = ", ".join(f"{k}={v}" for k, v in changes.items()) + how
    if str(d.get("purpose", "")).startswith("opening "):  # a journal written before ``set``: the switch only
        text = (
            f"{text} (only what differs from the configuration in effect: the candidate's set is its Proposal)"
            if changes
            else f"nothing to switch{how}: the configuration in effect is already the candidate's set (its Proposal)"
        )
    _line(console, "Applied", text)


def _verified(console: Console, d: dict[str, Any]) -> None:
    _line(
        console,
        "Verified",
        ", ".join(f"{k}={v}" for k, v in d.get("effective", {}).items()) or "effective values match",
    )


def _measured(console: Console, d: dict[str, Any]) -> None:
    """One run. A query set (a run of per-query times, ``total_time_s``: TPC-H) has no transactions per second:
    its line gives no tps, and its p95 is that of its queries' times (``workloads.tpch``: the 95th percentile of
    the per-query milliseconds of one pass), said so; omitted when the run has none."""
    m = d.get("measurement", d)
    role = d.get("label") or d.get("role")
    role = f" [{role}]" if role else ""
    taken = m.get("taken_at")
    why = (_DISCARDED.get() or {}).get(float(taken)) if isinstance(taken, int | float) else None
    style, rest = "bold yellow" if why else "bold", f"objective {_num(m.get('objective'))}, errors {m.get('errors', 0)}"
    said = f" — {why}" if why else ""
    if m.get("tps") is None and (m.get("per_query_s") or m.get("total_time_s") is not None):
        n = len(m.get("per_query_s") or {})
        of = "of its query's time" if n == 1 else f"of its {n} queries' times" if n else "of its queries' times"
        p95 = f", p95 {_num(m['latency_p95_ms'])} ms {of}" if m.get("latency_p95_ms") is not None else ""
        _line(console, "Measurement", f"{m.get('workload', '')}{role}: {rest}{p95}{said}", style)
        return
    _line(
        console,
        "Measurement",
        f"{m.get('workload', '')}{role}: tps {_num(m.get('tps'))}, p95 {_num(m.get('latency_p95_ms'))} ms, "
        f"{rest}{said}",
        style,
    )


def _failure(console: Console, d: dict[str, Any]) -> None:
    _line(console, "Failure", f"{d.get('phase')}: {d.get('message')}", "bold red")
    _bullets(console, d.get("logs", [])[-3:])


def _interrupted(console: Console, d: dict[str, Any]) -> None:
    """A run an outside restart or the session's stop ended (``runwatch.Interrupted``): no failure."""
    _line(console, "Interrupted", f"{d.get('phase')}: {d.get('message')} (not the candidate's failure)", "yellow")
    _bullets(console, [d.get("outside", "")])


def _recovery(console: Console, d: dict[str, Any]) -> None:
    _line(
        console,
        "Recovery",
        f"{d.get('action')}: {d.get('details')} (service available: "
        f"{d.get('service_available')}, verified: {d.get('verified')})",
        "bold yellow",
    )


def _decision(console: Console, d: dict[str, Any]) -> None:
    p = d["proposal"] if isinstance(d.get("proposal"), dict) else {}
    which = opening_label(p.get("stage"), p.get("planner"), p.get("rationale"))  # the opening's candidate
    if which and which.partition(" of ")[2] in str(d.get("reason", "")):
        which = ""  # the reason names it already (a screen's "race screen of 'evidence': …")
    # the effect only as far as measured: no figure for a disturbed or cut-off lone run, or no valid pair
    gain_text = f", {effect}" if (effect := decision_event_effect(d)) else ""
    _line(
        console,
        "Decision",
        f"{d.get('decision')}{' (kept)' if d.get('kept') else ''}{f' ({which})' if which else ''}{gain_text}: "
        f"{d.get('reason', '')}",
        "bold cyan",
    )


def _judged(console: Console, d: dict[str, Any]) -> None:
    """The decision's verdict. A query set's pairs are judged on the per-query statistic (the event's ``statistic``)
    while the medians are its total times: each figure says which it is (as the race's, ``race.Screen.result``)."""
    medians, per_query = "", bool(d.get("statistic"))
    if d.get("candidate_median") is not None and d.get("best_median") is not None:
        which = "total time, medians" if per_query else "medians"
        medians = f"candidate {_num(d['candidate_median'])} vs best {_num(d['best_median'])} ({which} of the pairs); "
    if per_query:
        medians += "by the per-query statistic: "
    disturbed = f"; {disturbed_told(len(d['disturbed']))}" if d.get("disturbed") else ""
    reused = ""
    if d.get("reused_best_run"):
        reused = "; pair 1's best run is the best configuration's run just before the trial"
    reason = str(d.get("reason", "")).removeprefix(f"{d.get('verdict')}: ")  # "undecided: undecided: …" read twice
    _line(console, "Judged", f"{d.get('verdict')}: {medians}{reason}{disturbed}{reused}")
    _bullets(console, [line for line in (pairs_told(d), width_told(d)) if line])


def _not_started(console: Console, d: dict[str, Any]) -> None:
    """``budget.not_started`` in words: the work, its cost prior and the time left (seconds)."""
    cost, left = d.get("cost_s"), d.get("left_s")
    figures = f" ({_num(cost, 0)} s by the cost prior) is more than the {_num(left, 0)} s of the time budget left"
    _line(console, "Not started", f"{d.get('work', 'the next work')} cost{figures}", "yellow")


def _disturbed(console: Console, d: dict[str, Any]) -> None:
    """A run the host disturbed, named with its objective; a pair's run says which run was discarded with it."""
    fate = "run used as it is" if d.get("kept") else "run discarded"  # kept: the baseline had no repeat left
    other = d.get("pair_with") or {}
    if other.get("label"):
        pair = str(d.get("label", "")).rpartition(" ")[2]
        fate += f"; pair {pair} discarded with {other['label']} (objective {_num(other.get('objective'))})"
    level = f" (objective {_num(d['objective'])})" if d.get("objective") is not None else ""
    _line(console, "Disturbed", f"{d.get('label')}{level}: {d.get('reason', '')} ({fate})", "yellow")


def _noise(console: Console, d: dict[str, Any]) -> None:
    _line(console, "Noise", str(d.get("advice", "")), "yellow")


def _reverted(console: Console, d: dict[str, Any]) -> None:
    _line(console, "Reverted", f"back to {d.get('to')}: {d.get('reason', '')}", "bold yellow")


def _final(console: Console, d: dict[str, Any]) -> None:
    changes = d.get("changes") or {}
    start = d.get("start_from") or {}
    unchanged = "the starting configuration, unchanged" + (
        " (from --start-from: " + ", ".join(f"{k}={v}" for k, v in start.items()) + ")" if start else ""
    )
    _line(
        console,
        "Final",
        f"{d.get('stage', '')} best configuration: "
        + (", ".join(f"{k}={v}" for k, v in changes.items()) or unchanged)
        + ("" if d.get("verified", True) else f" NOT verified: {d.get('error', '')}"),
    )


def _pristine(console: Console, d: dict[str, Any]) -> None:
    _line(
        console,
        "Pristine",
        f"data copied from {d.get('data_dir')} in {d.get('seconds')} s; {d.get('reason', '')}",
        "dim",
    )


def _stop(console: Console, d: dict[str, Any]) -> None:
    used = d.get("budget_used")
    budget = float(d.get("time_budget_s") or 0.0)
    parts = [f"{d.get('decision')}: {d.get('reason', '')}"]
    if d.get("elapsed_s") is not None:
        parts.append(
            f"{d.get('elapsed_s')} s of a {budget:g} s budget"
            + (f" ({float(used):.0%})" if isinstance(used, int | float) else "")
            + f", {d.get('rounds_done')} of {d.get('max_rounds')} rounds"
            + (f", a round costs about {d.get('round_cost_s')} s" if d.get("round_cost_s") else "")
        )
    _line(console, "Stop", "; ".join(parts), "bold")
    for r in d.get("search_rounds") or []:
        gain = r.get("gain")
        interval = (
            f" [{r['low']:+.1%}, {r['high']:+.1%}]"
            if isinstance(r.get("low"), int | float) and isinstance(r.get("high"), int | float)
            else ""
        )
        gain_text = f"{gain:+.1%}" if isinstance(gain, int | float) else "n/a"
        console.print(
            f"  {'':<12} • search round {r.get('round')}: {escape(str(r.get('judged')))}, gain {gain_text}"
            f"{escape(interval)}, {'kept' if r.get('kept') else 'not kept'}"
        )


def _remediation(console: Console, d: dict[str, Any]) -> None:
    head, details = remediation_text(d)
    _line(console, "Remediation", head)
    for line in details:
        console.print(f"  {'':<12} {escape(line)}")


def _intent_closed(console: Console, d: dict[str, Any]) -> None:
    _line(console, "Closed", f"intent closed: {d.get('how')}", "dim")


def _race(console: Console, d: dict[str, Any]) -> None:
    from agenticdb.loop.race import race_lines  # lazy: start-up cost (loop.race loads scipy: ~1.5 s per CLI call)

    _bullets(console, [_told(line) for line in race_lines(d)])


_RENDERERS: dict[str, Callable[[Console, dict[str, Any]], None]] = {
    "baseline": _baseline,
    "profile": _profile,
    "proposal": _proposal,
    "verdict": _verdict,
    "intent": _intent,
    "applied": _applied,
    "verified": _verified,
    "measured": _measured,
    "failure": _failure,
    "run.interrupted": _interrupted,
    "recovery": _recovery,
    "decision": _decision,
    "judged": _judged,
    "run.disturbed": _disturbed,
    "noise.high": _noise,
    "reverted": _reverted,
    "final": _final,
    "intent.closed": _intent_closed,
    "pristine.captured": _pristine,
    "stop": _stop,
    "root_cause": lambda console, d: _line(console, "Root cause", story_line(d), "bold"),
    "remediation": _remediation,
    "race": _race,
    "budget.not_started": _not_started,
    "diagnosis": lambda console, d: _line(
        console, "Diagnosis", f"{d.get('bottleneck')} (what the baseline showed; {d.get('by', '')})"
    ),
    "query_weights": lambda console, d: _line(console, "Query set", str(d.get("reason", "")), "dim"),
    "daemon.stop": lambda console, d: _line(console, "Daemon", f"stopped: {stop_text([d])}", "dim"),
}


def _render_event(console: Console, ev: JournalEvent) -> None:
    render = _RENDERERS.get(ev.event)
    if render is not None:
        render(console, ev.data)
        return
    d = ev.data
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # Σ, →, µs as they are
    _line(console, ev.event, clip(text, 200), "dim")


def _render_late(console: Console, ev: JournalEvent) -> None:
    if ev.event == "intent.closed":
        _line(console, "Closed", f"round {ev.round_no}'s intent closed: {ev.data.get('how')}", "dim")
        return
    _line(console, f"Round {ev.round_no}", "(an event about that round, written during this one):", "dim")
    _render_event(console, ev)


def render_story(console: Console, session_id: str, events: list[JournalEvent]) -> None:
    """Print a session's events as a story: header, one block per round, and the session end. A long source or
    rationale clause the story repeats is printed once, numbered, then referred to (``report.footnotes``): the
    story is rendered twice, the first time only to count them."""
    notes = Footnotes()
    token, discarded = _NOTES.set(notes), _DISCARDED.set(discarded_runs(events))
    try:
        _story(Console(file=io.StringIO(), width=console.width), session_id, events)  # counts the clauses
        notes.settle()
        _story(console, session_id, events)
    finally:
        _NOTES.reset(token)
        _DISCARDED.reset(discarded)


def _story(console: Console, session_id: str, events: list[JournalEvent]) -> None:
    token = _SNAPSHOTS.set(set())
    try:
        _story_events(console, session_id, events)
    finally:
        _SNAPSHOTS.reset(token)


def _story_events(console: Console, session_id: str, events: list[JournalEvent]) -> None:
    titles = round_titles(events)
    start = next((e.data for e in events if e.event == "session.start"), {})
    console.print(f"[bold]Session {escape(session_id)}[/]")
    if start:
        _line(console, "Target", str(start.get("target", "?")))
        _line(console, "Workload", str(start.get("workload", "?")))
    if events:
        _line(console, "Started", events[0].ts)
    current: int | None = None
    for ev in events:
        if ev.event == "session.start":
            continue
        if ev.event == "session.end":
            d = ev.data
            console.print(Rule("Session end"))
            _line(console, "Status", f"{d.get('status', '?')}: {d.get('reason', '')}".rstrip(": "))
            _line(
                console,
                "Objective",
                f"baseline {_num(d.get('baseline_objective'))} → best {_num(d.get('best_objective'))}"
                + start_gain_note(events)
                + remeasured_note(events),
            )
            best = d.get("best_config") or d.get("best_changes")
            if best:
                _line(console, "Best config", ", ".join(f"{k}={v}" for k, v in best.items()))
            continue
        if late_event(ev, current):
            _render_late(console, ev)
            continue
        if ev.round_no is not None and ev.round_no != current:
            current = ev.round_no
            console.print(Rule("Baseline" if current == 0 else titles.get(current, f"Round {current}")))
        _render_event(console, ev)
    _ending(console, events)


def _ending(console: Console, events: list[JournalEvent]) -> None:
    """The footer of a story without ``session.end``: the daemon's pseudo-session stopped cleanly after
    its last ``daemon.start`` reads "Stopped" with when and why (``report.daemon_stop``); "unfinished" only when
    no end or stop event follows (still running, or the process died)."""
    if any(e.event == "session.end" for e in events):
        return
    stopped = daemon_stop(events)
    if stopped is not None:
        console.print(Rule("Daemon stopped"))
        _line(console, "Stopped", f"{stopped.ts}: {stopped.why}")
        return
    starts = any(e.event == "daemon.start" for e in events)
    console.print(Rule("unfinished"))
    what = "daemon.stop event after its last daemon.start" if starts else "session.end event"
    console.print(f"  the {'daemon' if starts else 'session'} has no {what} (still running, or the process died)")
