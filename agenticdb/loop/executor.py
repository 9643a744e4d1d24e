"""Executor: snapshot → intent → apply → verify → run the workload → measurement + state deltas.

A trial whose values are not verified in effect is never measured (pg-postmaster-reload case: a
``postmaster`` GUC applied by reload stays ``pending_restart`` and would score the old value). Any
exception becomes a ``Failure`` with its phase and server log lines; the session hands it to recovery.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import structlog

from agenticdb.config import Settings
from agenticdb.host.prewarm import loaded, prewarm_database
from agenticdb.host.server_log import server_reason, with_reason
from agenticdb.host.services import ServiceError
from agenticdb.loop.recovery import restore_verified
from agenticdb.loop.runwatch import (
    STOPPING,
    Interrupted,
    OutsideRestart,
    RunWatch,
    StopInterrupted,
    stop_interruption,
    with_world,
)
from agenticdb.measure.disturbance import DisturbanceSampler, DisturbanceThresholds, HostSample, classified, summarize
from agenticdb.measure.trial_limit import TrialLimit
from agenticdb.models import (
    ApplyMode,
    Execution,
    Failure,
    FailurePhase,
    Measurement,
    NormalizedChange,
    RuntimeState,
    Snapshot,
    StateDelta,
    Verdict,
)
from agenticdb.store.journal import Journal
from agenticdb.targets.base import Target, TargetError, VerifyError
from agenticdb.workloads.base import Workload, WorkloadError

log = structlog.get_logger(__name__)

PREWARM_MAX_S = 20.0
"""Longest prewarm after a restart (seconds); the time warm-up follows it (docs/measurement.md "Warm-up")."""
JUST_STARTED_S = 300.0
"""An observe-only workload's server (workload live: the application's own) up for less than this (seconds) at
the executor's first run was just started: it is prewarmed then; one up for longer has the cache of the
application's work, which a prewarm must not evict. A benchmark's first run is always prewarmed: its data was
often just loaded (a bulk load leaves shared_buffers cold) or its server just started."""


def prewarm_after_restart(target: Target, max_s: float = PREWARM_MAX_S, started_within_s: float | None = None) -> str:
    """Load the workload's relations into the DBMS's buffer cache after a restart (``agenticdb.host.prewarm``:
    PostgreSQL's pg_prewarm in the target's workload database, bounded by shared_buffers and ``max_s``
    seconds), log one ``run.prewarm`` line and return the note a measurement carries (``Measurement.prewarm``).

    MariaDB reloads its own buffer pool at start-up (``innodb_buffer_pool_load_at_startup``, on by default) and
    the Linux target has no cache of its own: "" for them, as for a server up longer than ``started_within_s``.
    A prewarm that cannot run (the role may not create pg_prewarm, the database not reachable) returns
    "prewarm not available: <reason>; time warm-up only", logged as a warning: never silent, never raised.
    """
    dsn, database = getattr(target, "dsn", None), getattr(target, "database", None)  # PostgresTarget's
    if target.family != "postgresql" or not isinstance(dsn, str):
        return ""
    done = prewarm_database(dsn, database if isinstance(database, str) else None, max_s, started_within_s)
    if done is None:
        return ""
    if done.unavailable:
        log.warning("run.prewarm", reason=done.note())
    else:
        log.info(
            "run.prewarm",
            relations=done.relations,
            mib=done.mib,
            seconds=done.seconds,
            stopped=done.stopped,
            skipped=done.skipped or None,
            reason="restart emptied shared_buffers: loaded before the time warm-up",
        )
    return done.note()


def warmup_after_restart(workload: Workload, warmup_s: float, prewarm: str | None) -> float:
    """The warm-up (seconds) before a run right after a restart whose prewarm said ``prewarm``
    (``Measurement.prewarm``): ``max(3 s, 2 × warmup_s)``, caches being cold; a query set
    (``Workload.warmup_is_pass``) whose prewarm loaded the cache (``host.prewarm.loaded``) gets its usual
    ``warmup_s``: a restart leaves the page cache as the last pass left it (docs/measurement.md "Warm-up after a
    restart"). Also the harness's reset wrapper's rule."""
    if getattr(workload, "warmup_is_pass", False) and loaded(prewarm):
        return warmup_s
    return max(3.0, 2 * warmup_s)


def merge_states(*states: RuntimeState) -> RuntimeState:
    """One RuntimeState from several sources (DBMS + host); names are namespaced so they never collide."""
    out = RuntimeState(taken_at=states[0].taken_at if states else time.time())
    for s in states:
        out.counters.update(s.counters)
        out.gauges.update(s.gauges)
        out.wait_events.update(s.wait_events)
        out.unread.update(s.unread)
    return out


class _DuringRun:
    """Samples runtime state a few times while the workload runs: gauges from the middle sample, wait
    events summed over all samples (a wait seen in several samples is a wait that lasts)."""

    def __init__(self, sample: Callable[[], RuntimeState], duration_s: float, samples: int = 4) -> None:
        self.sample = sample
        self.interval = max(duration_s / (samples + 1), 0.5)
        self.samples: list[RuntimeState] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="state-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(self.sample())

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> RuntimeState | None:
        self._stop.set()
        self._thread.join(timeout=10)
        if not self.samples:
            return None
        mid = self.samples[len(self.samples) // 2]
        waits: dict[str, int] = {}
        for s in self.samples:
            for k, v in s.wait_events.items():
                waits[k] = waits.get(k, 0) + v
        return RuntimeState(gauges=dict(mid.gauges), wait_events=waits, taken_at=mid.taken_at)


class Executor:
    """Applies verified change sets to one target and measures them with the session's workload.

    Args:
        target: the target whose parameters change (DBMS or Linux).
        state_sources: callables returning RuntimeState samples taken around each run (the DBMS
            target's ``runtime_state`` and the host's).
        workload: the benchmark; ``warmup_s`` and ``duration_s`` in seconds.
        journal: where intent/applied/verified/measured events go.
        dry_run: validate and journal the intent, but change nothing and measure nothing.
        before_measure: called before every measured run (``loop.reset_data``: restore the pristine data
            directory of a sandbox so results do not drift with table growth).
        warmup_max_s: ``workload.warmup_max_s``: each measured run is this much longer and scored on its
            steady window (docs/measurement.md).
        server_pid: returns the DBMS server's process id at the start of each measured run, so its CPU
            counts as ours in the disturbance sample; default: the pid file of ``target`` (None for the
            Linux target: pass the DBMS target's in the OS stage).
        disturbance: thresholds that classify each run's host disturbance (default: the config defaults).
        watch_host: sample host disturbance during measured runs.
        dbms: the DBMS server whose buffer cache is prewarmed after a restart (:func:`prewarm_after_restart`);
            default ``target`` (pass the DBMS target in the OS stage).
        prewarm_max_s: the prewarm's time bound (seconds; 0: no prewarm, time warm-up only).
    """

    def __init__(
        self,
        target: Target,
        state_sources: list[Callable[[], RuntimeState]],
        workload: Workload,
        journal: Journal,
        session_id: str,
        warmup_s: float,
        duration_s: float,
        dry_run: bool = False,
        before_measure: Callable[[], object] | None = None,
        warmup_max_s: float = 0.0,
        server_pid: Callable[[], int | None] | None = None,
        disturbance: DisturbanceThresholds | None = None,
        watch_host: bool = True,
        dbms: Target | None = None,
        prewarm_max_s: float = PREWARM_MAX_S,
    ) -> None:
        self.target = target
        self.dbms = dbms or target
        self.prewarm_max_s = prewarm_max_s
        self.state_sources = state_sources
        self.workload = workload
        self.journal = journal
        self.session_id = session_id
        self.warmup_s = warmup_s
        self.duration_s = duration_s
        self.dry_run = dry_run
        self.before_measure = before_measure
        self.warmup_max_s = warmup_max_s
        self.server_pid = server_pid or target.server_pid
        self.disturbance = disturbance or DisturbanceThresholds()
        self.watch_host = watch_host
        self.should_stop: Callable[[], bool] = lambda: False
        """The session's stop request (``TuningSession.should_stop``): a run an outside signal ended while it
        is set is the stop's interruption (``runwatch.StopInterrupted``), never the configuration's failure."""
        self.last_run: Measurement | None = None
        """The last run this executor measured (None before the first): whether a best run was the last one
        before a trial (``auditor.adoptable_prior``)."""

    @classmethod
    def for_stage(
        cls,
        cfg: Settings,
        target: Target,
        dbms: Target,
        workload: Workload,
        journal: Journal,
        session_id: str,
        extra_sources: list[Callable[[], RuntimeState]],
        before_measure: Callable[[], object] | None = None,
    ) -> Executor:
        """The executor of one stage of a tuning session: ``target`` (the DBMS, or the Linux host in the OS
        stage) measured with the session's workload and ``cfg.workload`` timings (seconds). Runtime state is
        sampled from ``target``, the DBMS server ``dbms`` (when it is not the target) and ``extra_sources``;
        the DBMS server's CPU counts as ours in every stage; disturbance thresholds come from ``cfg.loop``."""
        sources = [target.runtime_state]
        if target is not dbms:
            sources.append(dbms.runtime_state)
        return cls(
            target,
            sources + extra_sources,
            workload,
            journal,
            session_id,
            cfg.workload.warmup_s,
            cfg.workload.duration_s,
            before_measure=before_measure,
            warmup_max_s=cfg.workload.warmup_max_s,
            server_pid=dbms.server_pid,
            disturbance=DisturbanceThresholds.from_config(cfg.loop),
            dbms=dbms,
        )

    def sample_state(self) -> RuntimeState:
        """Merged runtime state from every source (a source that fails contributes nothing)."""
        samples = []
        for source in self.state_sources:
            try:
                samples.append(source())
            except Exception as exc:  # noqa: BLE001 - statistics are evidence, not a reason to fail a trial
                log.warning("state.sample_failed", error=str(exc))
        return merge_states(*samples) if samples else RuntimeState()

    def measure(
        self,
        round_no: int | None,
        label: str,
        after_restart: bool = False,
        limit: TrialLimit | None = None,
        stoppable: bool = False,
    ) -> tuple[Measurement, StateDelta]:
        """Warm up, then run the workload once with state samples around the measured run.

        After a restart the buffer cache is cold: the workload's relations are loaded into it first
        (:func:`prewarm_after_restart`, at most ``prewarm_max_s``; also before the executor's first run:
        :meth:`_prewarm`), then the warm-up is longer
        (``max(3 s, 2 × warmup_s)``): otherwise every restart-requiring change starts with a handicap that is
        not the knob's effect (issue 36: 493.9 TPS/p95 on the first run after a restart, 862 on the next). A
        query set (``Workload.warmup_is_pass``) whose prewarm loaded the cache gets its usual warm-up only: a
        restart leaves the page cache as the last pass left it, and the extra pass cost a minute per restart on
        pg-tpch, which priced every restart-only knob out of an 8-minute session (docs/measurement.md).
        The measurement's ``prewarm`` says what was loaded, or why nothing could be, and ``prewarm_s`` how long
        the step took (seconds, ``time.monotonic``; the cost priors count it after a restart, ``race_cost.CostBasis``).
        The measured run lasts ``warmup_max_s + duration_s`` and is scored on its steady window; the host
        disturbance during that window is attached to the measurement, classified on its own (the
        auditor classifies it again against the run it is paired with).

        ``limit`` (a trial's first run): the workload stops a run far worse than the best early and returns
        it with ``Measurement.cut_off`` set (``agenticdb.measure.trial_limit``).

        ``stoppable`` (a race screen's run, worth nothing unfinished since no proof follows a stop): the stop
        request (``should_stop``) ends it at once: not started when already requested, else the workload ends
        its warm-up or run (``Workload.stop``); told as :class:`~agenticdb.loop.runwatch.StopInterrupted`.

        Raises:
            WorkloadError: the run failed or produced no result.
            StopInterrupted: the session's stop ended (or did not let start) the warm-up or the run.
        """
        if stoppable and self.should_stop():
            raise StopInterrupted(f"{label} not started", f"the run was not started, {STOPPING} (stop requested)")
        self.workload.stop = self.should_stop if stoppable else None
        if self.before_measure is not None:
            self.before_measure()  # e.g. a pristine data reset on a sandbox (restarts the server)
            after_restart = True
        self.workload.next_run(label)
        began = time.monotonic()
        prewarm = self._prewarm(after_restart)
        prewarm_s = round(time.monotonic() - began, 3)  # the step's own time: a restart's cost prior counts it
        warmup = warmup_after_restart(self.workload, self.warmup_s, prewarm) if after_restart else self.warmup_s
        if warmup > 0:
            try:
                self.workload.warmup(warmup)
            except WorkloadError as exc:
                self._stop_interrupted(exc)
                raise
        before = self.sample_state()
        world = RunWatch(self.target, self._server_pid)
        world.begin()
        sampler = _DuringRun(self.sample_state, self.duration_s + self.warmup_max_s)
        watch = DisturbanceSampler(self._server_pid()) if self.watch_host and self.workload.samples_host else None
        sampler.start()
        if watch is not None:
            watch.start()
        self.workload.limit = limit
        try:
            measurement = self.workload.run(
                self.duration_s,
                warmup_max_s=self.warmup_max_s,
                on_tool_start=watch.add_process if watch is not None else None,
            )
        except WorkloadError as exc:
            self._stop_interrupted(exc)
            outside, evidence = world.outside(exc)
            if outside:  # someone else's requested restart: not the candidate's failure (issue 38)
                raise OutsideRestart(str(exc), evidence, exc.output) from exc
            raise
        finally:
            self.workload.limit = self.workload.stop = None
            during = sampler.finish()
            samples = watch.stop() if watch is not None else []
        measurement = self._with_disturbance(measurement, samples, watch, label)
        if prewarm:
            measurement = measurement.model_copy(update={"prewarm": prewarm, "prewarm_s": prewarm_s})
        changed = world.changes()
        if changed:
            measurement = with_world(measurement, changed)
            log.warning("run.world_changed", label=label, seen=changed, reason="never judged; repeated within the caps")
        self.last_run = measurement
        after = self.sample_state()
        delta = StateDelta.between(before, after)
        if during is not None:
            # Gauges and wait events describe the load only while it runs (after it, every client is gone).
            delta.gauges.update(during.gauges)
            delta.wait_events = dict(during.wait_events)
        self.journal.append(
            self.session_id,
            "measured",
            {"label": label, "measurement": measurement.model_dump(mode="json")},
            round_no,
        )
        log.info(
            "trial.measured",
            label=label,
            objective=round(measurement.objective, 3),
            tps=measurement.tps,
            p95_ms=measurement.latency_p95_ms,
            objective_se=measurement.objective_se,
            disturbed=measurement.disturbance.disturbed if measurement.disturbance else None,
        )
        return measurement, delta

    def _prewarm(self, after_restart: bool) -> str:
        """The prewarm before a run: after a restart, and before the executor's first run (an observe-only
        workload's: only when the server was just started, :data:`JUST_STARTED_S`). A workload whose warm-up
        restarts the server itself (``restarts_in_warmup``) prewarms after that restart instead when a warm-up
        runs: what is loaded here would be dropped."""
        if self.prewarm_max_s <= 0:
            return ""
        if getattr(self.workload, "restarts_in_warmup", False) and (after_restart or self.warmup_s > 0):
            return ""  # its warm-up runs next and restarts the server: the workload prewarms after that
        if after_restart:
            return prewarm_after_restart(self.dbms, self.prewarm_max_s)
        if self.last_run is None:
            within = JUST_STARTED_S if getattr(self.workload, "observes_only", False) else None
            return prewarm_after_restart(self.dbms, self.prewarm_max_s, started_within_s=within)
        return ""

    def _server_pid(self) -> int | None:
        try:
            return self.server_pid()
        except Exception as exc:  # noqa: BLE001 - a missing pid only makes the disturbance sample coarser
            log.warning("disturbance.server_pid_failed", error=str(exc))
            return None

    def _with_disturbance(
        self, m: Measurement, samples: list[HostSample], watch: DisturbanceSampler | None, label: str
    ) -> Measurement:
        """``m`` with the host disturbance of its scored window, classified without a reference."""
        d = summarize(samples, from_s=m.steady_start_s or 0.0)
        if d is None:
            return m
        d = classified(d, None, self.disturbance)
        if watch is not None and watch.server_pid is None:
            log.warning("disturbance.server_unknown", label=label, reason="no server pid: its CPU counts as outside")
        if d.disturbed:  # the caller decides what a disturbed run means and warns once, with its decision
            log.debug("run.disturbance_seen", label=label, reason=d.reason)
        return m.model_copy(update={"disturbance": d})

    def measure_at(
        self,
        snapshot: Snapshot,
        changes: list[NormalizedChange],
        round_no: int,
        label: str,
        after_restart: bool = False,
    ) -> Measurement:
        """Put ``snapshot`` in effect (``recovery.restore_verified``), check ``changes`` are in effect, and
        measure once: one run of a paired comparison (the auditor's confirmation).

        Raises:
            TargetError: the snapshot could not be restored and verified, or a change is not in effect.
            WorkloadError: the run failed.
        """
        restored = restore_verified(self.target, snapshot)
        if not restored.verified:
            raise TargetError(
                f"cannot put '{snapshot.label}' in effect for {label}: {restored.problem()}", restored.logs
            )
        if changes:
            self.target.verify(changes)
        return self.measure(round_no, label, after_restart=after_restart)[0]

    def apply(
        self,
        changes: list[NormalizedChange],
        mode: ApplyMode,
        round_no: int | None,
        safe: Snapshot,
        purpose: str = "trial",
        whole: Sequence[NormalizedChange] = (),
    ) -> tuple[bool, dict[str, str]]:
        """Journal the intent (holding ``safe``), apply, verify. Returns (restarted, effective values). ``whole``: the
        opening's candidate set ``changes`` switch to (what differs from the values in effect), verified too and
        journaled as ``set`` with ``start`` (values in ``safe``): the story tells it against the start, not the switch.

        Raises:
            TargetError / ServiceError: the apply or verification failed (caller turns it into a Failure).
        """
        self.journal.append(
            self.session_id,
            "intent",
            {
                "purpose": purpose,
                "target": self.target.kind,
                "mode": mode.value,
                "changes": [c.model_dump(mode="json") for c in changes],
                "snapshot": safe.model_dump(mode="json"),
            },
            round_no,
        )
        if self.dry_run:
            return False, {}
        restarted = self.target.apply(changes, mode)
        told = {"set": {c.name: c.value for c in whole}, "start": {c.name: safe.values.get(c.name) for c in whole}}
        self.journal.append(
            self.session_id,
            "applied",
            {
                "purpose": purpose,
                "mode": mode.value,
                "restarted": restarted,
                "changes": {c.name: c.value for c in changes},
                **(told if whole else {}),
            },
            round_no,
        )
        effective = self.target.verify([*changes, *(c for c in whole if c.name not in {d.name for d in changes})])
        self.journal.append(self.session_id, "verified", {"purpose": purpose, "effective": effective}, round_no)
        log.info("apply.verified", purpose=purpose, mode=mode.value, restarted=restarted, values=effective)
        return restarted, effective

    def trial(self, verdict: Verdict, safe: Snapshot, round_no: int, limit: TrialLimit | None = None) -> Execution:
        """Apply ``verdict.changes`` (already validated), verify, measure (bounded by ``limit``). Never raises
        for target or workload errors: they come back as ``Execution.failure``."""
        changes = verdict.changes
        phase: FailurePhase = "apply"
        restarted = False
        effective: dict[str, str] = {}
        try:
            phase = "restart" if verdict.apply_requirement == ApplyMode.restart else "apply"
            restarted, effective = self.apply(changes, verdict.apply_requirement, round_no, safe)
            if self.dry_run:
                return Execution(applied=False, effective={})
            phase = "workload"
            measurement, delta = self.measure(round_no, "candidate", after_restart=restarted, limit=limit)
            return Execution(
                applied=True,
                effective=effective,
                measurement=measurement,
                state_delta=delta,
                restarted=restarted,
            )
        except (TargetError, ServiceError, WorkloadError, OSError) as exc:
            failure = self.failure(exc, phase, changes, round_no)
            return Execution(applied=False, effective=effective, restarted=restarted, failure=failure)

    def _stop_interrupted(self, exc: WorkloadError) -> None:
        """Raise ``StopInterrupted`` when the session's stop ended the tool of a warm-up or a run (a Ctrl-C or
        a service manager's stop that reached the tool too: ``runwatch.stop_interruption``); else return."""
        stopping = stop_interruption(exc, self.should_stop)
        if stopping:
            raise StopInterrupted(str(exc), stopping, exc.output) from exc

    def failure(
        self, exc: Exception, phase: FailurePhase, changes: list[NormalizedChange], round_no: int, what: str = ""
    ) -> Failure:
        """Turn an error of a trial or a paired run into a journaled ``Failure`` with the server's log
        lines (the error's own, the tool's output, else the log tail); a VerifyError is phase "verify".
        The message ends with the server's own reason when its log gives one (``server_log.with_reason``:
        ``...; server log: FATAL: "min_wal_size" must be at least twice "wal_segment_size"``).

        Args:
            exc: the error (TargetError, ServiceError, WorkloadError, OSError).
            phase: where it happened ("apply", "restart", "workload").
            changes: the changes that were being tried.
            round_no: the round, for the journal.
            what: prefix for the message ("confirmation run failed").
        """
        logs = list(exc.logs) if isinstance(exc, TargetError) else []
        output = exc.output if isinstance(exc, ServiceError | WorkloadError) else ""
        if output:
            logs += str(output).splitlines()[-40:]
        if not logs:
            try:
                logs = self.target.log_tail(40)
            except Exception:  # noqa: BLE001 - the log is evidence; its absence is not another failure
                logs = []
        if isinstance(exc, VerifyError):
            phase = "verify"
        message = with_reason(f"{what}: {exc}" if what else str(exc), logs)
        reason = server_reason(logs) or ""
        outside = exc.evidence if isinstance(exc, Interrupted) else ""
        failure = Failure(
            phase=phase, message=message, logs=logs[-60:], server_reason=reason, attempted=changes, outside=outside
        )
        # an interrupted run is no failure of the configuration tried: journaled under its own name
        event = "run.interrupted" if outside else "failure"
        self.journal.append(self.session_id, event, failure.model_dump(mode="json"), round_no)
        said = "trial.interrupted" if outside else "trial.failed"
        log.warning(said, phase=phase, error=message, server_reason=reason or None)
        return failure


class PairedRuns:
    """The runs of an interleaved comparison for the auditor (``auditor.RunSource``): the best (safe)
    configuration and the candidate. A run of the configuration already in effect is measured as it is;
    a switch goes through ``restore_verified`` first (and the candidate's changes are verified in effect).

    The candidate is in effect when this is created (right after its trial); its snapshot is taken
    before the first switch to the best one.

    Args:
        executor: measures the stage's target.
        names: the parameters a snapshot covers (the stage catalog's knobs).
        safe: the best configuration's snapshot.
        changes: the candidate's changes (verified in effect before each candidate run).
        round_no: the round, for the journal.
        after_restart: the changes need a restart (longer warm-up after each switch).
    """

    def __init__(
        self,
        executor: Executor,
        names: list[str],
        safe: Snapshot,
        changes: list[NormalizedChange],
        round_no: int,
        after_restart: bool,
    ) -> None:
        self.executor, self.names, self.safe, self.changes = executor, names, safe, changes
        self.round_no, self.after_restart = round_no, after_restart
        self.candidate: Snapshot | None = None
        self.active = "candidate"

    def run(self, config: str, label: str) -> Measurement:
        """Measure ``config`` ("best" | "candidate") once, switching to it first when needed.

        Raises:
            TargetError: the switch could not be verified. WorkloadError: the run failed.
        """
        if self.candidate is None:
            self.candidate = self.executor.target.snapshot(self.names, label=f"candidate {self.round_no}")
        label = f"confirm {label}"
        if config == self.active:
            return self.executor.measure(self.round_no, label)[0]
        snapshot, changes = (self.safe, []) if config == "best" else (self.candidate, self.changes)
        self.active = config
        return self.executor.measure_at(snapshot, changes, self.round_no, label, self.after_restart)

    def keep_candidate(self) -> None:
        """Leave the candidate in effect (the last pair may have ended on the best configuration), so the
        configuration kept is the one the decision was about.

        Raises:
            TargetError: the candidate could not be put back and verified.
        """
        if self.active == "candidate" or self.candidate is None:
            return
        restored = restore_verified(self.executor.target, self.candidate)
        if not restored.verified:
            raise TargetError(f"cannot put the kept candidate back: {restored.problem()}", restored.logs)
        self.executor.target.verify(self.changes)
        self.active = "candidate"
