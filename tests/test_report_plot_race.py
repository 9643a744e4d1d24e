"""`agenticdb report --plot` draws the opening's race: one point per screened candidate, a cut-off screen
marked as such, beside the baseline and the rounds, and the leader's proof labelled with its candidate.

The journal is written by a real TuningSession over the in-memory target (tests/memtarget.py) racing three
hand-written whole configurations (the race's mechanics tests, tests/test_race.py): a placebo, a loser 10 ×
worse (cut off by the real progress-line rule) and a winner 3 × the start, proven on fresh pairs and kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from test_race import LOSER, PLACEBO, WINNER, candidates, events, session
from test_report_plot import _legend

from agenticdb.report.data import report_data
from agenticdb.report.plot import DPI, FIGSIZE, curve_of, plot_session
from agenticdb.store.journal_events import JournalEvent


def _raced(tmp_path: Path) -> list[JournalEvent]:
    s, _, _, _ = session(tmp_path, candidates(("placebo", PLACEBO), ("loser", LOSER), ("winner", WINNER)))
    result = s.run()
    assert result.status == "completed", result.reason
    return s.journal.events(s.session_id)


def test_the_plot_shows_each_screen_by_name_and_the_proof(tmp_path: Path) -> None:
    evs = _raced(tmp_path)
    table = next(e for e in evs if e.event == "race").data["table"]
    curve = curve_of(evs)

    # every measured screen is a point, named, at its round's decision, on the axis of the baseline
    assert [(s.round_no, s.name) for s in curve.screens] == [(1, "placebo"), (2, "loser"), (3, "winner")]
    rows = {row["candidate"]: row for row in table}
    assert [s.objective for s in curve.screens] == [rows[s.name]["objective"] for s in curve.screens]
    placebo, loser, winner = curve.screens
    assert loser.cut_off and loser.cut_off == rows["loser"]["cut_off_reason"] and loser.objective < curve.baseline
    assert not placebo.cut_off and placebo.objective == curve.baseline == 100.0
    assert winner.objective == 300.0 and winner.leader and not placebo.leader and not loser.leader
    assert [s.t for s in curve.screens] == sorted(s.t for s in curve.screens)
    assert max(x for x, _ in curve.baseline_runs) < placebo.t

    # the screens are not trials (no pairs); the leader's proof (round 4) is, kept, named after its candidate
    assert {t.round_no for t in curve.trials}.isdisjoint({1, 2, 3})
    proof = next(t for t in curve.trials if t.round_no == 4)
    assert proof.kept and proof.opening == "opening proof of 'winner'" and proof.t > winner.t
    assert proof.low is not None and proof.low <= proof.objective == pytest.approx(300.0)
    assert curve.best == 300.0

    labels = _legend(curve)
    assert "race screen (one run)" in labels and "race screen cut off" in labels, labels

    # rendered to a file: a PNG of the figure's size
    out = tmp_path / "race.png"
    drawn = plot_session(evs, out, "race")
    assert len(drawn.screens) == 3
    with Image.open(out) as img:
        assert img.format == "PNG" and img.size == (int(FIGSIZE[0] * DPI), int(FIGSIZE[1] * DPI))


def test_the_json_report_carries_the_race(tmp_path: Path) -> None:
    s, _, _, _ = session(tmp_path, candidates(("loser", LOSER), ("winner", WINNER)))
    assert s.run().status == "completed"
    evs = s.journal.events(s.session_id)
    meta = next(m for m in s.journal.sessions() if m.id == s.session_id)
    doc = report_data(s.session_id, meta, evs, [])
    race = doc["race"]
    assert race == events(s, "race")[0].data and race["leader"] == "winner"
    assert [(r["candidate"], r["cut_off"]) for r in race["table"]] == [("loser", True), ("winner", False)]


def test_a_session_without_an_opening_has_no_screens(tmp_path: Path) -> None:
    s, _, _, _ = session(tmp_path, None, loop={"opening": False}, script=[{"work_mem": "8MB"}])
    assert s.run().status == "completed"
    evs = s.journal.events(s.session_id)
    assert curve_of(evs).screens == [] and "race screen (one run)" not in _legend(curve_of(evs))
    meta = next(m for m in s.journal.sessions() if m.id == s.session_id)
    assert report_data(s.session_id, meta, evs, [])["race"] is None
