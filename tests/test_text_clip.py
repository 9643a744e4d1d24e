"""Text cut for people (``agenticdb.units.text.clip``) and a note a DBA needs, never cut.

A new user's story read "limits: random_page_cost left: the baseline measured no I/O wait (… vda average queue
depth wei)": the limits source had sliced the measured reason at 160 characters, mid-word, and closed the
parenthesis as if it were whole. The recorded states are real servers' statistics (tests/data/states)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_heuristic_planner import _ctx

from agenticdb.config.sections import PolicyConfig
from agenticdb.models import Bottleneck
from agenticdb.planner.diagnosis import diagnose
from agenticdb.planner.opening_limits import at_limits
from agenticdb.planner.opening_values import SourceInput, delta_of, host_view
from agenticdb.units.text import clip


def test_clip_cuts_at_a_word_boundary_and_says_it_cut() -> None:
    assert clip("vda average queue depth weighted_ms/elapsed = 0.60", 30) == "vda average queue depth…"
    assert clip("SELECT  a,\n  b FROM t", 12) == "SELECT a, b…"  # the head ends on a whole word: kept
    assert clip("EXPLAIN failed (canceling statement due to timeout)", 22) == "EXPLAIN failed…"  # no "(" left open
    assert clip("fits as it is", 13) == "fits as it is" and clip("one\nline", 20) == "one line"
    long_token = "/var/lib/postgresql/15/main/base/16384/16397"
    assert clip(long_token, 20) == long_token[:19] + "…"  # one word longer than the limit: cut inside it, said
    assert all(len(clip("word " * 40, n)) <= n for n in range(2, 120))


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        (",,,,,,,,,,,,,,,,", 8, ",,,,,,,…"),  # only punctuation: was "…" alone
        (";;;; ;;;; ;;;; ;;;;", 12, ";;;; ;;;;…"),  # punctuation words: was "…" alone
        ("(((( word and more", 6, "((((…"),  # the head before the boundary is all separators: was "…"
        ("...........", 5, "....…"),
        ("x ((((((((((((((((", 10, "x…"),  # a dangling "(" after a word still goes
    ],
)
def test_clip_of_punctuation_keeps_what_it_cut_from(text: str, limit: int, expected: str) -> None:
    """A text of separators (",;:(" and spaces, which clip drops at the end of a head) was clipped to "…" alone:
    nothing left of the text. The head is kept as cut when dropping them would leave nothing."""
    assert clip(text, limit) == expected


def test_clip_refuses_a_limit_it_cannot_keep() -> None:
    """A limit below 2 (one character and "…") was raised to 2: clip("abc", 1) gave 'a…', longer than asked."""
    for limit in (1, 0, -3):
        with pytest.raises(ValueError, match=f"limit = {limit}: must be at least 2"):
            clip("abc", limit)
    assert clip("ab", 2) == "ab" and clip("abc", 2) == "a…"


@given(st.text(alphabet=" ,;:(.-/ab\n\t", max_size=60), st.integers(min_value=2, max_value=40))
def test_clip_is_never_empty_nor_too_long_nor_cut_mid_word_where_a_boundary_is(text: str, limit: int) -> None:
    """Any text of words, separators and white space: what clip returns fits the limit, is empty only for a blank
    text, is the text itself when it fits, and otherwise is a head of the text followed by "…". When the text has
    a word boundary (a space) in the second half of the room, the head ends at one: what follows it in the text
    is a space or a separator clip drops (",;:("), never the rest of a word."""
    one = " ".join(text.split())
    out = clip(text, limit)
    assert len(out) <= limit and bool(out) == bool(one), (text, limit, out)
    if len(one) <= limit:
        assert out == one
        return
    head = out.removesuffix("…")
    assert out.endswith("…") and head and one.startswith(head), (text, limit, out)
    keep = limit - 1
    if one[keep] == " " or one[:keep].rfind(" ") >= limit // 2:
        assert one[len(head)] in " ,;:(", (text, limit, out)


def test_the_limits_note_keeps_the_measured_reason_whole_in_one_note() -> None:
    ctx = _ctx("pg_cpu", workload_class="olap")
    hw = ctx.profile.hardware.model_copy(update={"storage_measured": "ssd"})  # flash: the I/O knobs are candidates
    ctx = ctx.model_copy(update={"profile": ctx.profile.model_copy(update={"hardware": hw})})
    delta = delta_of(ctx)
    assert delta is not None
    io = next(h for h in diagnose(delta, ctx.profile, "postgresql", ctx.stage) if h.bottleneck == Bottleneck.io_queue)
    assert io.ruled_out is not None and len(io.ruled_out) > 160, io  # longer than the old cut
    out = at_limits(SourceInput(ctx, host_view(ctx, "postgresql"), PolicyConfig()))
    notes = [n for n in out.notes if "left: the baseline measured no I/O wait" in n]
    assert notes == [
        f"limits: effective_io_concurrency, random_page_cost left: the baseline measured no I/O wait ({io.ruled_out})"
    ], out.notes
