"""Text cut for people (``agenticdb.units.text.clip``) and a note a DBA needs, never cut.

A new user's story read "limits: random_page_cost left: the baseline measured no I/O wait (… vda average queue
depth wei)": the limits source had sliced the measured reason at 160 characters, mid-word, and closed the
parenthesis as if it were whole. The recorded states are real servers' statistics (tests/data/states)."""

from __future__ import annotations

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
