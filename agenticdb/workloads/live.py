"""The live workload (``workload.kind = "live"``): observe the application's own traffic; send no load.

Each measured "run" is an observation window on the server's statement statistics
(:mod:`agenticdb.workloads.livestats`): a snapshot at the start, one per second, one at the end; the
window is the difference.

Objective, mix-normalised (``live_time_index``, lower is better). The first window of the workload is
the baseline: its top ``live.top_queries`` statements by total execution time, each with its baseline
mean time ``m0_q`` and its share of the top queries' time ``w_q``. A later window's index is::

    index = Σ_q w_q · (m_q / m0_q) / Σ_q w_q      over the top queries with ≥ live.min_calls calls

so each statement is compared with itself: a shift of the traffic mix (more of a cheap query, less of
an expensive one) leaves the index at 1, a configuration that makes the heavy queries faster lowers it.
The baseline window scores 1 by definition. Throughput (statements/s, transactions/s) is reported in
``qps``/``tps`` beside it, never used as the objective. The standard error comes from batch means over
the per-second snapshots (``agenticdb.measure.series``).

Quiet windows: when the counted top queries carry less than ``live.min_weight`` of the baseline time
(too few calls), the window is extended by ``duration_s``, at most ``live.max_extend`` times; after that
it is skipped with a ``WorkloadError`` (the journal records it as the run's failure).

Guard: every second of a candidate window (``next_run`` says which window is next), the index so far
and the rollback rate are checked; beyond ``live.guard_max_slowdown`` or ``live.guard_max_error_rate``
the window stops at once with :class:`GuardTripped` (a ``WorkloadError``), and the session's recovery
puts the best configuration back (``recovery.restore_verified``). The error names the figures.

Connection turnover: a MariaDB ``SET GLOBAL`` of a session variable (sort_buffer_size, tmp_table_size, …)
reaches only sessions opened after it (MariaDB KB "SET"). ``next_run`` records the application's open
sessions (``reader.sessions()``; None on PostgreSQL, where a reload reaches open sessions); the window
then starts once they have all closed, waiting at most ``live.turnover_max_s``. When some are still
open, the window runs anyway and its notes (journaled with the measurement) say it measured a mix of
old and new sessions. Baseline windows do not wait: no change of ours precedes them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from agenticdb.config.sections import LiveConfig, WorkloadConfig
from agenticdb.measure.series import batch_slices, se_of_batches
from agenticdb.models import Disturbance, LiveQuery, Measurement, RuntimeState, SeriesPoint
from agenticdb.workloads.base import Connection, Workload, WorkloadError, WorkloadTraits
from agenticdb.workloads.livestats import (
    QueryStat,
    StatReader,
    StatSnapshot,
    counters_went_down,
    short_text,
    stat_reader,
)

log = structlog.get_logger(__name__)

OBJECTIVE = "live_time_index"


class GuardTripped(WorkloadError):
    """The guard stopped a window: the top queries slowed down or errors rose beyond the limit."""


@dataclass(frozen=True)
class Baseline:
    """The reference window's top statements: ``weights`` (share of their total time, sum 1),
    ``means`` (ms per call) and ``texts`` by query id."""

    weights: dict[str, float]
    means: dict[str, float]
    texts: dict[str, str]


def window_delta(a: StatSnapshot, b: StatSnapshot) -> dict[str, QueryStat]:
    """Per-statement counters between snapshots ``a`` and ``b`` (statements with calls in between).

    A statement evicted and re-entered (pg_stat_statements.max) or reset restarts its counters: a
    negative difference is read as "counted from zero" (the later value).
    """
    out: dict[str, QueryStat] = {}
    for qid, s in b.queries.items():
        p = a.queries.get(qid)
        if p is None or s.calls < p.calls:
            d = s
        else:
            d = QueryStat(
                calls=s.calls - p.calls,
                total_ms=s.total_ms - p.total_ms,
                rows=s.rows - p.rows,
                hit_blocks=s.hit_blocks - p.hit_blocks,
                read_blocks=s.read_blocks - p.read_blocks,
                temp_bytes=s.temp_bytes - p.temp_bytes,
                errors=s.errors - p.errors,
                text=s.text,
            )
        if d.calls > 0:
            out[qid] = d
    return out


def baseline_of(delta: dict[str, QueryStat], top: int, min_calls: int) -> Baseline | None:
    """The top ``top`` statements by total time in ``delta`` with at least ``min_calls`` calls; None
    when no statement qualifies."""
    ranked = sorted((q for q in delta.items() if q[1].calls >= min_calls), key=lambda q: -q[1].total_ms)[:top]
    total = sum(s.total_ms for _, s in ranked)
    if not ranked or total <= 0:
        return None
    return Baseline(
        weights={q: s.total_ms / total for q, s in ranked},
        means={q: s.total_ms / s.calls for q, s in ranked},
        texts={q: short_text(s.text) for q, s in ranked},
    )


def time_index(delta: dict[str, QueryStat], base: Baseline, min_calls: int) -> tuple[float | None, float]:
    """The mix-normalised index of a window and the baseline weight it covers.

    Returns:
        (index, covered): ``index`` = Σ w_q·(m_q/m0_q) / Σ w_q over the baseline's top statements with at
        least ``min_calls`` calls in the window (None when none has); ``covered`` = Σ w_q of those, in [0, 1].
    """
    num = covered = 0.0
    for qid, w in base.weights.items():
        d = delta.get(qid)
        if d is None or d.calls < min_calls or base.means[qid] <= 0:
            continue
        num += w * (d.total_ms / d.calls) / base.means[qid]
        covered += w
    return (num / covered if covered > 0 else None), covered


class LiveWorkload(Workload):
    """Observation windows on the application's own statements (no load of ours).

    Args:
        cfg: ``workload`` settings (``max_error_rate`` is not used: errors belong to the guard).
        live: ``live`` settings (top queries, minimum calls, extensions, guard limits).
        reader: the statistics reader (``livestats.stat_reader``).
        clock, sleep: seconds (monotonic) and a sleep function (tests drive a fake reader with them).
    """

    name = "live"
    observes_only = True

    def __init__(
        self,
        cfg: WorkloadConfig,
        live: LiveConfig,
        reader: StatReader,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cfg = cfg
        self.live = live
        self.reader = reader
        self.clock = clock
        self.sleep = sleep
        self.baseline: Baseline | None = None
        self.guard_armed = True  # run() called without next_run (tests, the API): the guard watches
        self._old_sessions: set[str] | None = None  # sessions open when the next window was announced
        self._reset_seen = ""  # what went down in the current window (a statistics reset), '' = nothing
        self._lock = threading.Lock()  # the executor's state sampler reads from another thread

    def traits(self) -> WorkloadTraits:
        return WorkloadTraits(
            benchmark="live",
            workload_class="mixed",
            read_fraction=0.5,
            access_pattern="application",
            scale=0.0,
            concurrency=0,
            objective=OBJECTIVE,
        )

    def prepare(self) -> None:
        """The set-up check (nothing is created: the data is the application's).

        Raises:
            LiveSetupError: the statement statistics are not available (what to change, one line).
        """
        self.reader.check()

    def next_run(self, label: str) -> None:
        """Arm the guard for candidate windows only: in a baseline or best window there is nothing to
        revert to (a slowdown there is the traffic's, not a change's). Outside baseline windows, record
        the application's open sessions: the window waits for them to close (module docstring)."""
        self.guard_armed = "candidate" in label
        self._old_sessions = None
        if "baseline" not in label and self.live.turnover_max_s > 0:
            self._old_sessions = self._sessions()

    def _sessions(self) -> set[str] | None:
        try:
            with self._lock:
                return self.reader.sessions()
        except WorkloadError as exc:  # the turnover is a refinement; the window can still be measured
            log.warning("live.sessions_unreadable", error=str(exc))
            return None

    def _turnover(self) -> str:
        """Wait (≤ ``live.turnover_max_s``) until the sessions recorded by ``next_run`` have closed.

        Returns:
            The window's note: how long the turnover took, or that the window measures old and new
            sessions ('' when there was nothing to wait for).
        """
        old, self._old_sessions = self._old_sessions, None
        if not old:
            return ""
        start = self.clock()
        left = old
        while True:
            now = self._sessions()
            left = old & now if now is not None else left
            waited = self.clock() - start
            if not left or now is None or waited >= self.live.turnover_max_s:
                break
            self.sleep(min(0.5, self.live.turnover_max_s - waited))
        if not left:
            log.info("live.turnover", sessions=len(old), waited_s=round(waited, 1), reason="all closed")
            return f"window started after the {len(old)} application sessions open before it closed ({waited:.0f} s)"
        log.warning(
            "live.mixed_sessions",
            still_open=len(left),
            sessions=len(old),
            waited_s=round(waited, 1),
            reason="sessions opened before the change still open at live.turnover_max_s",
        )
        return (
            f"mixed sessions: {len(left)} of the {len(old)} application sessions open before this window were still "
            f"open after {waited:.0f} s (live.turnover_max_s = {self.live.turnover_max_s:g}); settings that act on "
            "new sessions only (MariaDB SET GLOBAL of sort_buffer_size, tmp_table_size, …) reached part of the "
            "window's traffic"
        )

    def warmup(self, seconds: float) -> None:
        """Wait ``seconds`` without measuring (connections turn over, caches settle after a change)."""
        if seconds > 0:
            self.sleep(seconds)

    def _snapshot(self) -> StatSnapshot:
        with self._lock:
            return self.reader.snapshot()

    def runtime_state(self) -> RuntimeState:
        """Cumulative statement counters as runtime state (``live.*``) for the diagnosis: ``calls``,
        ``exec_ms``, ``temp_bytes``, ``read_blocks``, ``hit_blocks`` summed over observed statements, and
        ``spill_exec_ms``: the execution time of statements that have spilled to temporary files."""
        snap = self._snapshot()
        sums = {
            "calls": 0.0,
            "exec_ms": 0.0,
            "temp_bytes": 0.0,
            "read_blocks": 0.0,
            "hit_blocks": 0.0,
            "spill_exec_ms": 0.0,
        }
        for s in snap.queries.values():
            sums["calls"] += s.calls
            sums["exec_ms"] += s.total_ms
            sums["temp_bytes"] += s.temp_bytes
            sums["read_blocks"] += s.read_blocks
            sums["hit_blocks"] += s.hit_blocks
            if s.temp_bytes > 0:  # a statement that has spilled (since the statistics were reset)
                sums["spill_exec_ms"] += s.total_ms
        return RuntimeState(counters={f"live.{k}": v for k, v in sums.items()})

    def run(
        self, seconds: float, warmup_max_s: float = 0.0, on_tool_start: Callable[[int], object] | None = None
    ) -> Measurement:
        """Observe one window of ``seconds`` (extended when quiet) and score it.

        ``warmup_max_s`` is not used: a live window has no start-up transient of ours.

        Raises:
            GuardTripped: the guard stopped the window (figures in the message).
            WorkloadError: the window stayed quiet after ``live.max_extend`` extensions, or the
                statistics could not be read.
        """
        secs = max(1, round(seconds))
        self._reset_seen = ""
        turnover = self._turnover()
        snaps = [self._snapshot()]
        notes: list[str] = [turnover] if turnover else []
        extensions = 0
        target = secs
        while True:
            self._observe(snaps, target)
            delta = window_delta(snaps[0], snaps[-1])
            quiet = self._quiet(delta)
            if not quiet:
                break
            if extensions >= self.live.max_extend:
                raise WorkloadError(f"live window skipped: {quiet} after {extensions} extensions of {secs} s")
            extensions += 1
            target += secs
            notes.append(f"window extended to {target} s: {quiet}")
            log.info("live.window_extended", seconds=target, reason=quiet)
        reset = self._reset_seen or next(
            (w for a, b in zip(snaps, snaps[1:], strict=False) if (w := counters_went_down(a, b))), ""
        )
        if reset:  # the world changed under the window: never judged, repeated within the caps (issue 38)
            log.warning("live.window_disturbed", seen=reset, reason="statistics went down: never judged")
            return self._disturbed(snaps, delta, notes, reset)
        if self.baseline is None:
            self.baseline = baseline_of(delta, self.live.top_queries, self.live.min_calls)
            assert self.baseline is not None  # _quiet said a statement qualifies
            log.info("live.baseline", top=len(self.baseline.weights), queries=list(self.baseline.texts.values()))
        return self._measurement(snaps, delta, notes)

    def _disturbed(
        self, snaps: list[StatSnapshot], delta: dict[str, QueryStat], notes: list[str], seen: str
    ) -> Measurement:
        """The window's measurement marked disturbed by ``seen``; a baseline is not taken from it."""
        keep = self.baseline
        if self.baseline is None:
            self.baseline = baseline_of(delta, self.live.top_queries, 1)
        try:
            if self.baseline is None or time_index(delta, self.baseline, 1)[0] is None:
                secs = len(snaps) - 1
                m = Measurement(
                    workload=self.name,
                    tps=0.0,
                    duration_s=float(secs),
                    objective=1.0,
                    objective_name=OBJECTIVE,
                    higher_is_better=False,
                    raw_tail="; ".join(notes),
                )
            else:
                m = self._measurement(snaps, delta, notes, min_calls=1)
        finally:
            self.baseline = keep
        said = f"the server changed under the window: {seen}"
        d = Disturbance(
            samples=0,
            seconds=m.duration_s,
            other_cpu_cores=0.0,
            other_cpu_spread=0.0,
            disturbed=True,
            reason=said,
            world=[seen],
        )
        return m.model_copy(update={"disturbance": d, "raw_tail": f"{m.raw_tail}; {said}"})

    def _observe(self, snaps: list[StatSnapshot], until_s: int) -> None:
        """Append one snapshot per second until ``until_s`` seconds after ``snaps[0]``; the guard looks
        at each."""
        start = self.clock() - (len(snaps) - 1)
        while len(snaps) - 1 < until_s:
            nxt = start + len(snaps)
            wait = nxt - self.clock()
            if wait > 0:
                self.sleep(wait)
            snaps.append(self._snapshot())
            self._guard(snaps[0], snaps[-1], len(snaps) - 1)

    def _quiet(self, delta: dict[str, QueryStat]) -> str:
        """Why the window cannot be scored yet ('' when it can)."""
        if self.baseline is None:
            if baseline_of(delta, self.live.top_queries, self.live.min_calls) is None:
                where = getattr(self.reader, "watched", "") or "the configured database"
                return (
                    f"no statement had live.min_calls = {self.live.min_calls} calls in {where}; if the application "
                    'works in another database, set live.database to it ([live] database = "..." in the config, or '
                    "AGENTICDB_LIVE__DATABASE)"
                )
            return ""
        _, covered = time_index(delta, self.baseline, self.live.min_calls)
        if covered < self.live.min_weight:
            return (
                f"the top queries with ≥ {self.live.min_calls} calls carry {covered:.0%} of the baseline time "
                f"< live.min_weight = {self.live.min_weight:.0%}"
            )
        return ""

    def _guard(self, first: StatSnapshot, last: StatSnapshot, elapsed_s: int) -> None:
        """Stop the window when the top queries slowed or errors rose beyond the configured limits. Not
        after the statistics went down (a reset: the window's figures are no longer a difference), and only
        on statements long enough to time (``live.guard_min_mean_ms``)."""
        if not self.guard_armed or self.baseline is None or elapsed_s < self.live.guard_min_s:
            return
        if self._reset_seen or counters_went_down(first, last):
            self._reset_seen = self._reset_seen or counters_went_down(first, last)
            return
        delta = window_delta(first, last)
        judged = timable(self.baseline, delta, self.live.guard_min_mean_ms)
        if judged is None:
            index, covered = None, 0.0
        else:
            index, covered = time_index(delta, judged, self.live.min_calls)
        limit = 1.0 + self.live.guard_max_slowdown
        if judged is not None and index is not None and covered >= self.live.min_weight and index > limit:
            worst = _worst(delta, judged, self.live.min_calls)
            raise GuardTripped(
                f"live guard: the top queries' mean time is {index:.2f}× their baseline after {elapsed_s} s "
                f"(limit {limit:.2f}× = 1 + live.guard_max_slowdown; {worst}); reverting to the best configuration"
            )
        xacts, errors = last.xacts - first.xacts, last.rollbacks - first.rollbacks
        errors += sum(d.errors for d in delta.values())
        if xacts >= self.live.min_calls and errors / max(xacts, 1) > self.live.guard_max_error_rate:
            raise GuardTripped(
                f"live guard: error rate {errors / max(xacts, 1):.1%} ({errors} of {xacts} transactions rolled back "
                f"or failed) after {elapsed_s} s exceeds live.guard_max_error_rate = "
                f"{self.live.guard_max_error_rate:.1%}; reverting to the best configuration"
            )

    def _measurement(
        self, snaps: list[StatSnapshot], delta: dict[str, QueryStat], notes: list[str], min_calls: int | None = None
    ) -> Measurement:
        assert self.baseline is not None
        base = self.baseline
        index, covered = time_index(delta, base, self.live.min_calls if min_calls is None else min_calls)
        assert index is not None
        secs = len(snaps) - 1
        calls = sum(d.calls for d in delta.values())
        first, last = snaps[0], snaps[-1]
        xacts = last.xacts - first.xacts
        top_calls = sum(delta[q].calls for q in base.weights if q in delta)
        top_ms = sum(delta[q].total_ms for q in base.weights if q in delta)
        points = [
            SeriesPoint(t_s=float(i), tps=float(sum(d.calls for d in window_delta(snaps[i], snaps[i + 1]).values())))
            for i in range(secs)
        ]
        per_batch: list[float] = []
        for span in batch_slices(secs):
            # A batch scores the same statements as the window only when they carry the window's share
            # of the baseline time: a batch without a call of the heavy statement would be scored on the
            # cheap ones alone (another quantity), and its spread is not the window's sampling error.
            b_index, b_covered = time_index(window_delta(snaps[span.start], snaps[span.stop]), base, 1)
            if b_index is None or b_covered < min(covered, self.live.min_weight):
                per_batch = []
                break
            per_batch.append(b_index)
        queries = _queries(delta, base)
        # Session-scoped settings (MariaDB SET GLOBAL of sort_buffer_size, tmp_table_size, …) reach only
        # sessions opened after the change: say whether the window saw new sessions at all.
        opened = last.sessions - first.sessions
        notes.append(
            f"{opened} sessions opened in the window (agenticdb's own included)"
            if opened > 0
            else "no session opened in the window: settings that act on new sessions only were not measured"
        )
        log.info(
            "workload.measured",
            workload=self.name,
            index=round(index, 4),
            covered=round(covered, 3),
            calls_per_s=round(calls / secs, 1),
            xacts_per_s=round(xacts / secs, 1),
        )
        return Measurement(
            workload=self.name,
            tps=xacts / secs,
            qps=calls / secs,
            latency_mean_ms=top_ms / top_calls if top_calls else None,
            transactions=calls,
            errors=last.rollbacks - first.rollbacks + sum(d.errors for d in delta.values()),
            duration_s=float(secs),
            objective=index,
            objective_name=OBJECTIVE,
            higher_is_better=False,
            raw_tail="; ".join(notes + [f"top queries cover {covered:.0%} of the baseline time"]),
            series=points,
            steady_start_s=0.0,
            steady_s=float(secs),
            objective_se=se_of_batches(per_batch),
            live_queries=queries,
        )


def timable(base: Baseline, delta: dict[str, QueryStat], min_mean_ms: float) -> Baseline | None:
    """The baseline's statements long enough to time: a mean of at least ``min_mean_ms`` in the baseline or
    in this window ``delta`` (weights renormalised); None when there is none. The guard judges these only
    (``live.guard_min_mean_ms``): 0.02 → 0.08 ms is noise, 0.3 → 5 ms (a temporary table sent to disk)
    is a slowdown."""

    def mean(q: str) -> float:
        d = delta.get(q)
        return d.total_ms / d.calls if d is not None and d.calls else 0.0

    keep = {q: w for q, w in base.weights.items() if max(base.means[q], mean(q)) >= min_mean_ms}
    total = sum(keep.values())
    if not keep or total <= 0:
        return None
    return Baseline(
        weights={q: w / total for q, w in keep.items()},
        means={q: base.means[q] for q in keep},
        texts={q: base.texts[q] for q in keep},
    )


def _queries(delta: dict[str, QueryStat], base: Baseline) -> list[LiveQuery]:
    """The baseline's top statements as seen in this window (absent ones have zero calls)."""
    out = []
    for qid, w in base.weights.items():
        d = delta.get(qid)
        out.append(
            LiveQuery(
                queryid=qid,
                text=base.texts[qid],
                weight=w,
                baseline_mean_ms=base.means[qid],
                calls=d.calls if d else 0,
                mean_ms=d.total_ms / d.calls if d else None,
                temp_bytes=d.temp_bytes if d else 0,
                read_blocks=d.read_blocks if d else 0,
                hit_blocks=d.hit_blocks if d else 0,
            )
        )
    return out


def _worst(delta: dict[str, QueryStat], base: Baseline, min_calls: int) -> str:
    """The statement that slowed most, as 'queryid text: a ms → b ms'."""
    ratios = [
        (delta[q].total_ms / delta[q].calls / base.means[q], q)
        for q in base.weights
        if q in delta and delta[q].calls >= min_calls and base.means[q] > 0
    ]
    if not ratios:
        return "no statement with enough calls"
    r, q = max(ratios)
    return (
        f"worst {q} '{base.texts[q]}': {base.means[q]:.2f} ms → {delta[q].total_ms / delta[q].calls:.2f} ms ({r:.2f}×)"
    )


def build_live(cfg: WorkloadConfig, live: LiveConfig, conn: Connection) -> LiveWorkload:
    """The live workload against ``conn`` (PostgreSQL: pg_stat_statements; MariaDB/MySQL: performance_schema)."""
    return LiveWorkload(cfg, live, stat_reader(conn, live.database))
