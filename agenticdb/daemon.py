"""The long-lived service: crash reconciliation, scheduled sessions, monitoring, signals, sd_notify.

Daemon hygiene (docs/architecture.md, "The daemon"): signal handlers only set flags; repeated SIGHUPs merge into
one reload; an invalid new configuration keeps the old one running; shutdown happens in ``finally``.

Signals:
  SIGTERM/SIGINT (first)  finish the current round safely: the trial in flight is measured and then kept
                          or reverted as usual, the best configuration is applied and verified, exit 0.
                          In the opening's race the screen in flight ends at once and no further screen
                          or proof starts (a screen proves nothing without its proof; the start is back).
  SIGTERM/SIGINT (second) stop waiting for the benchmark: its processes are killed, the round fails, the
                          last safe configuration is restored, exit 0.
  SIGHUP                  reload the configuration file (kept only when valid; [target] and [storage] stay as
                          they are until a restart, and the journal's config.reload names what was not applied).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import structlog

from agenticdb.advice.remedy_gate import remedy_gate
from agenticdb.app import (
    advice_parts,
    build_session,
    build_target,
    build_workload,
    check_privileges,
    linux_target,
    open_memory,
    target_for_snapshot,
)
from agenticdb.config import ConfigError, Settings, load_config, recheck
from agenticdb.config.sections import in_window
from agenticdb.host.notify import Notifier
from agenticdb.logs import configure_logging
from agenticdb.loop.recovery import restore_os_originals, restore_verified
from agenticdb.models import RoundOutcome, RuntimeState, StateDelta
from agenticdb.report.metrics import DaemonMetrics, start_metrics
from agenticdb.store.journal import Journal
from agenticdb.store.journal_events import Intent
from agenticdb.store.journal_key import anchor_head
from agenticdb.store.lock import LockError, TargetLock
from agenticdb.store.memory import MemoryBook
from agenticdb.units.text import clip
from agenticdb.workload_kinds import KINDS

log = structlog.get_logger(__name__)

BENCHMARK_TOOLS = tuple(dict.fromkeys(tool for kind in KINDS for tool in kind.tools))
"""Benchmark tool process names (``KindSpec.tools`` of ``agenticdb.workload_kinds.KINDS``): pgbench, sysbench."""


@dataclass
class Flags:
    """Set by signal handlers, read by the main loop (nothing else happens in a handler)."""

    stop: int = 0
    reload: bool = False
    signals: list[str] = field(default_factory=list)


def reconcile(cfg: Settings, journal: Journal, memory: MemoryBook) -> list[str]:
    """Restore the last safe configuration for every open intent (a crash mid-trial), and put back OS
    originals of sessions that never finished. Returns one line per action (journaled too).

    Every restore goes through ``agenticdb.loop.recovery.restore_verified``, the path the session's revert and
    ``agenticdb rollback`` use.

    Raises:
        RuntimeError: an open intent could not be restored and verified (the daemon must not start
            tuning then).
    """
    actions: list[str] = []
    intents = journal.open_intents()
    # Oldest intent of a session holds its oldest safe snapshot; restore the newest per target, which
    # is the last configuration that was known safe before the crash.
    latest: dict[tuple[str, str], Intent] = {}
    for intent in intents:
        latest[(intent.session_id, intent.target or "")] = intent
    for (session_id, kind), intent in latest.items():
        if intent.snapshot is None:
            raise RuntimeError(f"open intent {intent.id} of session {session_id} holds no snapshot to restore")
        target = target_for_snapshot(cfg, kind or intent.snapshot.target)
        try:
            result = restore_verified(target, intent.snapshot)
        finally:
            target.close()
        if not result.verified:
            raise RuntimeError(f"reconcile of intent {intent.id}: {result.problem('restore')}")
        journal.append(
            session_id,
            "reconcile",
            {"intent_id": intent.id, "target": kind, "snapshot": intent.snapshot.label, "verified": True},
            intent.round_no,
        )
        for other in intents:
            if other.session_id == session_id:
                journal.close_intent(session_id, other.round_no, "reconciled after crash")
        log.warning("daemon.reconciled", intent=intent.id, session=session_id, target=kind)
        actions.append(
            f"restored {kind} to '{intent.snapshot.label}' of session {session_id} (open intent {intent.id})"
        )
    unfinished = {s.id for s in memory.sessions() if s.status == "running"}
    todo = [o for o in memory.os_originals(session_id=None, unrestored_only=True) if o.session_id in unfinished]
    if todo:
        result = restore_os_originals(linux_target(cfg), memory, todo, "os originals (reconcile)")
        values = result.values
        if not result.verified:
            raise RuntimeError(f"reconcile of OS originals: {result.problem('restore')}")
        journal.append(todo[0].session_id, "reconcile", {"target": "linux", "values": values})
        actions.append(f"restored {len(values)} OS originals of unfinished sessions")
    for s in unfinished:
        memory.end_session(s, status="crashed")
    return actions


def anchor_session(journal: Journal, session_id: str) -> str:
    """Write the journal's chain head after ``session_id`` to the system journal (external anchor,
    agenticdb.store.journal_key.anchor_head) and record the channel in a ``journal.anchored`` event.
    Returns the channel ("journald", "syslog" or "none: why")."""
    row_id, head = journal.head()
    channel = anchor_head(session_id, row_id, head)
    log.info("daemon.anchored", session=session_id, row=row_id, head=head, channel=channel)
    journal.append(session_id, "journal.anchored", {"row": row_id, "hash": head, "channel": channel})
    return channel


def workload_mix(delta: StateDelta) -> tuple[float, float] | None:
    """(operations per second, read fraction) of the live workload from a runtime-state delta, or None
    when the target exposes no usable counters or nothing ran.

    PostgreSQL: rows fetched vs rows inserted/updated/deleted (pg_stat_database); MySQL/MariaDB:
    Com_select vs Com_insert/update/delete/replace (SHOW GLOBAL STATUS).
    """
    t = delta.totals
    reads = t.get("pg_stat_database.tup_fetched", 0.0) + t.get("global_status.Com_select", 0.0)
    writes = sum(t.get(f"pg_stat_database.tup_{k}", 0.0) for k in ("inserted", "updated", "deleted")) + sum(
        t.get(f"global_status.Com_{k}", 0.0) for k in ("insert", "update", "delete", "replace")
    )
    total = reads + writes
    if total <= 0 or delta.seconds <= 0:
        return None
    return total / delta.seconds, reads / total


class Daemon:
    """Owns the schedule and the process lifecycle; each tuning run is a ``TuningSession``."""

    def __init__(
        self,
        cfg: Settings,
        config_path: Path | None,
        overrides: dict[str, Any] | None = None,
        notifier: Notifier | None = None,
    ) -> None:
        self.cfg = cfg
        self.config_path = config_path
        self.overrides = overrides or {}
        self.notifier = notifier or Notifier()
        self.flags = Flags()
        self.last_run: float | None = None
        self.drift_due = False
        self._monitor_target: Any = None
        self._last_sample: RuntimeState | None = None
        self._last_sample_at = 0.0
        self._last_sync_at = time.monotonic()
        self._reference_mix: float | None = None
        self._busy = threading.Event()
        self._alive = threading.Event()
        self._desk: Any = None

    # -- signals: flags only
    def _on_stop(self, signum: int, frame: Any) -> None:
        self.flags.stop += 1
        self.flags.signals.append(signal.Signals(signum).name)

    def _on_hup(self, signum: int, frame: Any) -> None:
        self.flags.reload = True

    def install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    # -- helpers
    def _reload(self, journal: Journal) -> None:
        self.flags.reload = False
        if self.config_path is None:
            log.info("daemon.reload_skipped", reason="no config file given")
            return
        keep = {"target": self.cfg.target, "storage": self.cfg.storage}
        try:
            new = load_config(self.config_path)
            # the file's other sections must fit the target it runs on, as at a fresh start (check_settings)
            merged = recheck(new.model_copy(update=keep), f"{self.config_path} with the running [target]")
        except ConfigError as exc:
            log.error("daemon.reload_rejected", reason=str(exc).replace("\n", " "))
            journal.append("daemon", "config.reload", {"ok": False, "error": str(exc)})
            self.notifier.status("config reload rejected; running on the previous configuration")
            return
        # target and storage stay: a reload never re-points the daemon; what the file sets otherwise is said
        # (key names only: a DSN may hold a password)
        skipped = [
            f"{section}.{k}"
            for section, running in keep.items()
            for k in sorted(getattr(new, section).model_fields_set)
            if getattr(getattr(new, section), k) != getattr(running, k)
        ]
        self.cfg = merged
        journal.append("daemon", "config.reload", {"ok": True, **({"not_applied": skipped} if skipped else {})})
        log.info("daemon.reloaded", config=str(self.config_path))
        if skipped:
            log.warning("daemon.reload_not_applied", keys=skipped, reason="target and storage change on restart only")
            self.notifier.status(f"config reloaded; {', '.join(skipped)} not applied: restart the daemon for them")

    def _watchdog_loop(self) -> None:
        """Ping WATCHDOG=1 while the main thread lives (it may be blocked in a benchmark)."""
        interval = max(self.cfg.daemon.watchdog_s / 3, 0.5)
        if self.notifier.watchdog_usec:
            interval = min(interval, self.notifier.watchdog_usec / 2e6)
        main = threading.main_thread()
        while self._alive.is_set() and main.is_alive():
            self.notifier.watchdog()
            if self.flags.stop >= 2 and self._busy.is_set():
                self._kill_benchmarks()
            time.sleep(interval)

    @staticmethod
    def _kill_benchmarks() -> None:
        for child in psutil.Process().children(recursive=True):
            try:
                if child.name() in BENCHMARK_TOOLS:
                    # said before the kill: once the tool dies the main thread may end the session and the
                    # process before this (watchdog) thread logs again (a random-order suite run lost the line)
                    log.warning("daemon.benchmark_killed", pid=child.pid, name=child.name(), reason="second signal")
                    child.kill()
            except psutil.Error:
                pass

    def _monitor(self, journal: Journal) -> None:
        """Cheap periodic sample of runtime state (no benchmark): when the live read/write mix moves by more
        than ``daemon.drift_threshold`` from the mix seen after the last session, a re-tune is due."""
        now = time.monotonic()
        if now - self._last_sample_at < self.cfg.daemon.monitor_interval_s:
            return
        self._last_sample_at = now
        try:
            if self._monitor_target is None:
                self._monitor_target = build_target(self.cfg)
            sample = self._monitor_target.runtime_state()
        except Exception as exc:  # noqa: BLE001 - monitoring is best effort; the next sample retries
            log.info("daemon.monitor_failed", reason=str(exc))
            return
        previous, self._last_sample = self._last_sample, sample
        if previous is None:
            return
        mix = workload_mix(StateDelta.between(previous, sample))
        if mix is None:
            return
        rate, read_fraction = mix
        if self._reference_mix is None:
            self._reference_mix = read_fraction
            log.info("daemon.monitor_reference", read_fraction=round(read_fraction, 3), ops_per_s=round(rate, 1))
            return
        moved = abs(read_fraction - self._reference_mix)
        if moved > self.cfg.daemon.drift_threshold and not self.drift_due:
            self.drift_due = True
            journal.append(
                "daemon",
                "drift.detected",
                {
                    "reference_read_fraction": self._reference_mix,
                    "read_fraction": read_fraction,
                    "ops_per_s": rate,
                    "threshold": self.cfg.daemon.drift_threshold,
                },
            )
            log.warning(
                "daemon.drift",
                reference=round(self._reference_mix, 3),
                now=round(read_fraction, 3),
                reason="workload read/write mix drifted beyond the threshold: re-tune when a window allows",
            )

    def _due(self) -> bool:
        d = self.cfg.daemon
        if self.drift_due and in_window(d.windows):
            return True
        if self.last_run is None:
            return d.run_on_start and in_window(d.windows)
        return time.monotonic() - self.last_run >= d.interval_hours * 3600 and in_window(d.windows)

    def _run_session(self, journal: Journal, memory: MemoryBook) -> str:
        cfg = self.cfg
        check_privileges(cfg)
        target = build_target(cfg)
        workload = build_workload(cfg, target)
        lock = TargetLock(cfg.storage.home, cfg.target.dsn or "")
        lock.acquire()
        self._busy.set()
        try:

            def on_round(o: RoundOutcome) -> None:
                ch = ", ".join(f"{k}={v}" for k, v in o.changes.items()) or "no change"
                self.notifier.status(
                    f"round {o.round_no}/{cfg.loop.max_rounds}: {o.bottleneck.value} pressure, "
                    f"tried {ch}: {o.decision.value}"
                )

            session = build_session(
                cfg,
                target,
                workload,
                journal,
                memory,
                on_round=on_round,
                should_stop=lambda: self.flags.stop > 0,
                on_status=self.notifier.status,
                approve=self._approval().gate(journal, lambda: self.flags.stop > 0, self.notifier.status)
                if cfg.policy.mode == "approve"
                else None,
                remediate=remedy_gate(cfg, self._approval(), journal, lambda: self.flags.stop > 0, self.notifier.status)
                if cfg.policy.mode == "approve"
                else None,
            )
            self.notifier.status(f"tuning session {session.session_id} started")
            result = session.run()
            anchor_session(journal, result.session_id)
            return f"session {result.session_id} {result.status}: {result.reason}"
        finally:
            self._busy.clear()
            lock.release()
            target.close()

    # -- main
    def run(self) -> int:
        """Reconcile, READY, then schedule sessions until stopped. Returns the exit code."""
        cfg = self.cfg
        cfg.storage.home.mkdir(parents=True, exist_ok=True)

        journal = Journal(cfg.storage.journal_db, key_file=cfg.storage.key_path())  # type: ignore[arg-type]
        memory = open_memory(cfg, journal)
        metrics = start_metrics(cfg, journal)
        self.install_signals()
        self._alive.set()
        watchdog = threading.Thread(target=self._watchdog_loop, name="watchdog", daemon=True)
        try:
            journal.append("daemon", "daemon.start", {"config": str(self.config_path) if self.config_path else None})
            actions = self._reconcile(journal, memory)
            if actions is None:
                return 1
            for a in actions:
                log.warning("daemon.reconcile", action=a)
            if self.cfg.policy.mode != "auto" and not self._approval_ready(journal):
                return 2
            self._sync_central(memory)
            self.notifier.ready("ready" + (f"; {len(actions)} reconciliation(s) after a crash" if actions else ""))
            log.info("daemon.ready", reconciled=len(actions))
            watchdog.start()
            while not self.flags.stop:
                if self.flags.reload:
                    self._reload(journal)
                if self._due():
                    self.last_run = time.monotonic()
                    self.drift_due = False
                    self._reference_mix = None  # re-learn the mix the new configuration serves
                    self._sync_central(memory)
                    summary = self._due_run(journal, memory)
                    self.notifier.status(clip(summary, 200))
                    log.info("daemon.session_done", summary=summary)
                    if metrics is not None:
                        metrics.refresh()
                    continue
                waiting = self._approval().tick(journal) if self.cfg.policy.mode != "auto" else None
                if waiting is not None:  # policy.mode approve/advise: say what waits for a person
                    self.notifier.status(waiting)
                    time.sleep(0.5)
                    continue
                self._idle(journal, memory, metrics)
            return 0
        finally:
            if self._monitor_target is not None:
                self._monitor_target.close()
            self.notifier.stopping()
            self._alive.clear()
            journal.append("daemon", "daemon.stop", {"signals": self.flags.signals})
            log.info("daemon.stopped", signals=self.flags.signals)
            if metrics is not None:
                metrics.close()
            journal.close()
            memory.close()

    def _idle(self, journal: Journal, memory: MemoryBook, metrics: DaemonMetrics | None) -> None:
        """One idle tick: metrics textfile, pending uploads, monitoring, the STATUS line, 0.5 s sleep."""
        if metrics is not None:
            metrics.tick()
        if time.monotonic() - self._last_sync_at >= self.cfg.daemon.monitor_interval_s:
            self._sync_central(memory)
        self._monitor(journal)
        self.notifier.status(
            f"idle; next session in {self._next_in() / 60:.0f} min"
            if self.last_run
            else "idle; waiting for a maintenance window"
        )
        time.sleep(0.5)

    def _sync_central(self, memory: MemoryBook) -> None:
        """At start, before each session and every ``monitor_interval_s`` while pending rows exist:
        push what was learned while the central Memory Book was away (issue 19)."""
        self._last_sync_at = time.monotonic()
        if memory.central is not None and memory.has_pending():
            memory.central.retry()
            result = memory.central.push(memory)
            if result is not None and result.uploaded:
                log.info("daemon.central_synced", uploaded=result.uploaded, reason="experience learned meanwhile")

    def _reconcile(self, journal: Journal, memory: MemoryBook) -> list[str] | None:
        """Crash reconciliation before READY; None when it failed (the daemon must not tune then)."""
        # Reconcile only while holding the target lock: an open intent of a live `agenticdb tune` is
        # that process's trial, not a crash, and must not be rolled back under it.
        lock = TargetLock(self.cfg.storage.home, self.cfg.target.dsn or "")
        try:
            lock.acquire()
        except LockError as exc:
            log.warning("daemon.reconcile_skipped", reason=f"{exc}: its intents belong to a live process")
            return []
        try:
            return reconcile(self.cfg, journal, memory)
        except Exception as exc:  # noqa: BLE001 - refuse to tune on top of an unknown state
            log.error("daemon.reconcile_failed", reason=str(exc))
            journal.append("daemon", "daemon.stop", {"reason": f"reconcile failed: {exc}"})
            return None
        finally:
            lock.release()

    def _due_run(self, journal: Journal, memory: MemoryBook) -> str:
        """The run that is due: a tuning session, or (policy.mode advise, or approve with
        daemon.approve_source = advice) queued advice. Never raises: a failure is the summary."""
        cfg = self.cfg
        try:
            if cfg.policy.mode == "advise" or (cfg.policy.mode == "approve" and cfg.daemon.approve_source == "advice"):
                return str(self._approval().propose(journal))
            return self._run_session(journal, memory)
        except LockError as exc:
            return f"skipped: {exc}"
        except Exception as exc:  # noqa: BLE001 - one failed session must not kill the service
            log.error("daemon.session_failed", reason=str(exc))
            return f"session failed: {exc}"

    def _approval_ready(self, journal: Journal) -> bool:
        """Create the approval queue before READY; False (logged and journaled) when it cannot exist."""
        from agenticdb.advice.approval import ApprovalError  # lazy: start-up cost (loads 33 modules)

        try:
            self._approval()
        except (ApprovalError, OSError) as exc:
            log.error("daemon.approval_unavailable", reason=str(exc))
            journal.append("daemon", "daemon.stop", {"reason": f"approval queue: {exc}"})
            return False
        return True

    def _approval(self) -> Any:
        """The approval desk (agenticdb.advice.approval.Desk) of policy.mode approve/advise, made on first use."""
        if self._desk is None:
            from agenticdb.advice.approval import Desk  # lazy: start-up cost (loads 33 modules)

            self._desk = Desk(self.cfg, advice_parts())
        return self._desk

    def _next_in(self) -> float:
        if self.last_run is None:
            return 0.0
        return max(self.cfg.daemon.interval_hours * 3600 - (time.monotonic() - self.last_run), 0.0)


def run_daemon(cfg: Settings, config_path: Path | None = None, overrides: dict[str, Any] | None = None) -> int:
    """Entry point of ``agenticdb daemon``: INFO logs to stderr (journald), then ``Daemon.run``."""
    configure_logging(level=logging.INFO)
    return Daemon(cfg, config_path, overrides).run()
