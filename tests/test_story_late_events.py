"""`journal show` tells an event about an earlier round inside the round it was written in (issue 39: what a
DBA reads must be right). The race closes the previous screen's intent only once the next screen's switch
holds its own; the story must not re-open round 1's block in the middle of round 2."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from agenticdb.cli.story import render_story
from agenticdb.models import Verdict
from agenticdb.store.journal import Journal


def _story(journal: Journal, sid: str) -> list[str]:
    out = io.StringIO()
    render_story(Console(file=out, width=100, color_system=None), sid, journal.events(sid))
    return out.getvalue().splitlines()


def test_a_late_intent_close_stays_in_the_round_that_wrote_it(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    sid = "s1"
    journal.append(sid, "session.start", {"target": "postgresql", "workload": "tpch"})
    journal.append(sid, "intent", {"purpose": "race", "mode": "restart"}, round_no=1)
    journal.append(sid, "intent", {"purpose": "race", "mode": "restart"}, round_no=2)
    journal.close_intent(sid, 1, "superseded by round 2's switch")
    journal.append(sid, "decision", {"decision": "continue", "reason": "race screen"}, round_no=2)
    journal.close_intent(sid, 2, "kept")
    lines = _story(journal, sid)
    headers = [ln.strip("─ ") for ln in lines if ln.startswith("─")]
    assert headers == ["Round 1", "Round 2", "unfinished"], lines
    late = next(ln for ln in lines if "superseded" in ln)
    assert "round 1's intent closed: superseded by round 2's switch" in late
    assert lines.index(late) > lines.index(next(ln for ln in lines if "Round 2" in ln))
    assert any(ln.strip() == "Closed       intent closed: kept" for ln in lines), lines


def test_the_query_set_weights_are_told_as_a_sentence_not_escaped_json(tmp_path: Path) -> None:
    """A new user's `journal show` printed `query_weights {"reason":"pairs judged on d = \\u03a3 w_q\\u00b7ln(...`:
    the event is told by its reason, and any event without a renderer keeps its characters."""
    journal = Journal(tmp_path / "journal.db")
    sid = "s1"
    journal.append(sid, "session.start", {"target": "postgresql", "workload": "tpch"})
    reason = "pairs judged on d = Σ w_q·ln(best_q/candidate_q), weights frozen from 2 baseline runs (heaviest: q9 31%)"
    journal.append(sid, "query_weights", {"weights": {"q9": 0.31, "q1": 0.2}, "reason": reason})
    journal.append(sid, "no_renderer_here", {"note": "µs → ms"})
    text = "\n".join(_story(journal, sid))
    assert "Query set" in text and "d = Σ w_q·ln(best_q/candidate_q)" in text, text
    assert "\\u" not in text and "µs → ms" in text, text


def test_a_disturbed_baseline_run_kept_for_want_of_repeats_is_not_called_discarded(tmp_path: Path) -> None:
    """A new user read 'Disturbed baseline 2: … kept: no repeat left … (run discarded)' and then saw the run
    among the baseline's runs: a kept disturbed run says it was used."""
    journal = Journal(tmp_path / "journal.db")
    sid = "s1"
    journal.append(sid, "session.start", {"target": "postgresql", "workload": "tpch"})
    journal.append(sid, "run.disturbed", {"label": "baseline 1", "reason": "steal 40%", "kept": False}, round_no=0)
    journal.append(sid, "run.disturbed", {"label": "baseline 2", "reason": "steal 40%; kept: …", "kept": True}, 0)
    lines = [ln for ln in _story(journal, sid) if "Disturbed" in ln]
    assert "baseline 1: steal 40% (run discarded)" in lines[0], lines
    assert "baseline 2: steal 40%; kept: … (run used as it is)" in lines[1], lines


def test_a_verdict_says_what_a_capacity_rule_read_from_the_server(tmp_path: Path) -> None:
    """memory_tables.* is in no runtime sample: the max_heap_table_size rule reads it when it judges a change,
    and `journal show` tells what it read, accepted or not."""
    journal = Journal(tmp_path / "journal.db")
    sid = "s1"
    journal.append(sid, "session.start", {"target": "mariadb", "workload": "sysbench"})
    read = {"memory_tables.largest_bytes": 9436672.0}
    journal.append(sid, "verdict", Verdict(ok=True, read=read).model_dump(mode="json"), round_no=1)
    text = "\n".join(_story(journal, sid))
    assert "read from the server for a capacity rule: memory_tables.largest_bytes=9,436,672" in text, text


def test_a_trial_users_confusing_story_lines_read_in_words(tmp_path: Path) -> None:
    """A new user's trial: `budget.not_started` printed as raw JSON, 'Judged undecided: undecided: budget ended …'
    said its verdict twice, and a race that left a candidate out said so in its notes twice when the generator
    gave the same note twice ('limits: innodb_io_capacity left for the hdd data device')."""
    journal = Journal(tmp_path / "journal.db")
    sid = "s1"
    journal.append(sid, "session.start", {"target": "mariadb", "workload": "sysbench"})
    work = "the proof's smallest decision"
    data = {"work": work, "left_s": 133.1, "cost_s": 137.0, "reason": "time budget nearly used: …"}
    journal.append(sid, "budget.not_started", data, round_no=4)
    reason = "undecided: budget ended inside the decision (no valid pair); the best configuration so far stays"
    journal.append(sid, "judged", {"verdict": "undecided", "reason": reason}, round_no=4)
    note = "limits: innodb_io_capacity left for the hdd data device"
    journal.append(sid, "race", {"table": [], "leader": None, "notes": [note, note]}, round_no=4)
    text = "\n".join(_story(journal, sid))
    assert "{" not in text and "cost_s" not in text, text
    assert "Not started  the proof's smallest decision cost (137 s by the cost prior) is more than the 133 s" in text
    assert "Judged       undecided: budget ended inside the decision (no valid pair)" in text, text
    assert text.count(note) == 1, text
