"""``agenticdb apply ID...``: apply chosen recommendations the way a tuning round applies a trial (issue 16).

The same parts as a round: the validator (with the ``--start-from`` relaxation of
:func:`agenticdb.advice.advise.advice_policy`), a snapshot of every catalog knob, ``Executor.apply`` (journal
``intent`` holding the snapshot, ``applied``, ``verified``) and, on any failure,
``Recovery.recover`` back to the snapshot. The run is journaled as a session of its own (planner
"advice"), so ``agenticdb rollback --dbms`` finds its snapshot and puts the values from before back;
OS parameters save their originals in the Memory Book first, so ``rollback --os`` restores them.
"""

from __future__ import annotations

import getpass
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from agenticdb.advice.advise import advice_policy, host_fingerprint
from agenticdb.advice.types import AdviceParts, Recommendation
from agenticdb.config import Settings
from agenticdb.errors import SessionError
from agenticdb.host.hardware import detect_hardware
from agenticdb.host.services import ServiceError
from agenticdb.invocation import command
from agenticdb.loop.executor import Executor
from agenticdb.loop.recovery import Recovery
from agenticdb.models import Bottleneck, Change, Layer, Proposal, Verdict
from agenticdb.models.planning import Fingerprint
from agenticdb.store.journal import Journal
from agenticdb.store.lock import TargetLock
from agenticdb.store.memory import MemoryBook
from agenticdb.targets.base import Target, TargetError
from agenticdb.validation.validator import validate
from agenticdb.workloads.base import WorkloadError

log = structlog.get_logger(__name__)


class ApplyRefused(SessionError):
    """The validator refused the chosen set, or applying it failed (the snapshot was restored)."""


@dataclass
class Applied:
    """What ``apply_recommendations`` did: the session id, effective values and optional measurements."""

    session_id: str
    effective: dict[str, str] = field(default_factory=dict)
    restarted: bool = False
    objectives: dict[str, float] = field(default_factory=dict)


def os_user() -> str:
    """The OS user running this process (journaled as who decided or applied)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _validate(cfg: Settings, target: Target, layer: Layer, recs: list[Recommendation]) -> Verdict:

    catalog = target.catalog()
    proposal = Proposal(
        bottleneck=Bottleneck.unknown,
        layer=layer,
        changes=[Change(name=r.knob, value=r.recommended, rationale=f"{r.id}: {r.reason}") for r in recs],
        rationale="recommendations chosen by " + os_user() + ": " + ", ".join(r.id for r in recs),
        planner="advice",
    )
    current = target.current_values(list(catalog.knobs))
    hardware = detect_hardware(target.data_dir, pid=target.server_pid())
    return validate(
        proposal,
        catalog,
        current,
        hardware,
        advice_policy(cfg.policy, len(recs)),
        layer,
        can_restart=target.can_restart(),
    )


def apply_recommendations(
    cfg: Settings,
    target: Target,
    recs: list[Recommendation],
    measure: bool = False,
    who: str | None = None,
    *,
    parts: AdviceParts,
) -> Applied:
    """Validate, snapshot, apply and verify ``recs`` (all of one layer is not required: DBMS
    recommendations go to ``target``, OS ones to the Linux host), journaled as one session.

    Args:
        cfg: settings (policy, storage, workload for ``measure``).
        target: the DBMS target.
        recs: the recommendations to apply (from :func:`agenticdb.advice.advise.advise`).
        measure: run the configured workload once before and once after (objective journaled; one run
            each says little on a noisy host: the auditor's paired runs are ``tune``'s job).
        who: the person the journal names (default: the OS user of this process).
        parts: the builders of the wiring (``app.advice_parts()``): stores, workload, the Linux target.

    Raises:
        ApplyRefused: the validator refused the set (nothing changed), or applying failed (the snapshot
            was restored; the message says whether that restore was verified).
        LockError: another agenticdb process holds the target.
    """
    sid = datetime.now().strftime("%Y%m%d-%H%M%S-") + "apply-" + uuid.uuid4().hex[:6]
    journal, memory = parts.open_stores(cfg)
    lock = TargetLock(cfg.storage.home, cfg.target.dsn or "")
    lock.acquire()
    done = Applied(sid)
    try:
        start = {
            "target": target.kind,
            "workload": "none (agenticdb apply)",
            "planner": "advice",
            "durability": cfg.policy.durability,
            "who": who or os_user(),
            "recommendations": [r.model_dump(mode="json") for r in recs],
        }
        journal.append(sid, "session.start", start)
        workload = parts.build_workload(cfg, target)
        groups = _groups(cfg, target, recs, sid, journal, memory, parts)
        ex = Executor(
            target, [target.runtime_state], workload, journal, sid, cfg.workload.warmup_s, cfg.workload.duration_s
        )

        def measured(round_no: int, label: str, after_restart: bool = False) -> float:
            m = ex.measure(round_no, label, after_restart=after_restart)[0]
            if m.disturbance is not None and m.disturbance.disturbed:  # said once, here: the executor does not
                data = {"label": label, "reason": m.disturbance.reason, "objective": m.objective}
                journal.append(sid, "run.disturbed", data, round_no=round_no)
                log.warning("run.disturbed", label=label, reason=m.disturbance.reason)
            return m.objective

        if measure:
            workload.prepare()
            done.objectives["before"] = measured(0, "before apply")
        for round_no, (layer, tgt) in enumerate(groups, start=1):
            chosen = [r for r in recs if r.layer == layer]
            if chosen:
                group_ex = ex if tgt is target else Executor(tgt, [], workload, journal, sid, 0.0, 0.0)
                _apply_group(cfg, chosen, group_ex, journal, round_no, done)
        if measure:
            done.objectives["after"] = measured(3, "after apply", after_restart=done.restarted)
        journal.append(sid, "session.end", {"status": "applied", "best_changes": done.effective, "reason": "applied"})
        return done
    except ApplyRefused as exc:
        journal.append(sid, "session.end", {"status": "failed", "reason": str(exc)})
        raise
    except WorkloadError as exc:
        raise _measure_failed(journal, sid, done, exc) from exc
    finally:
        lock.release()
        journal.close()
        memory.close()


def _measure_failed(journal: Journal, sid: str, done: Applied, exc: WorkloadError) -> ApplyRefused:
    """``--measure``'s workload failed: journaled as the session's end, saying what stays in effect."""
    state = (
        f"the applied values stay in effect ({command('rollback --dbms')} undoes them)"
        if done.effective
        else "nothing was changed"
    )
    journal.append(sid, "session.end", {"status": "failed", "reason": f"--measure: {exc}; {state}"})
    return ApplyRefused(f"--measure: the workload failed: {exc}; {state}")


def _groups(
    cfg: Settings,
    target: Target,
    recs: list[Recommendation],
    sid: str,
    journal: Journal,
    memory: MemoryBook,
    parts: AdviceParts,
) -> list[tuple[Layer, Target]]:
    """The targets the recommendations go to: the DBMS, and the Linux host when any is an OS one (its
    originals saved in the Memory Book and journaled before the first write, for ``rollback``)."""
    groups: list[tuple[Layer, Target]] = [(Layer.dbms, target)]
    if any(r.layer == Layer.os for r in recs):
        memory.start_session(sid, target="linux", fingerprint=_fp(target), workload="advice")

        def store(name: str, value: str) -> None:
            memory.save_os_original(sid, name, value)
            journal.append(sid, "os.original", {"name": name, "value": value}, 1)

        groups.append((Layer.os, parts.linux_target(cfg, data_dir=target.data_dir, state_store=store)))
    return groups


def _fp(target: Target) -> Fingerprint:
    return host_fingerprint(
        target.kind, target.version_major(), detect_hardware(target.data_dir, measure_storage=False)
    )


def _apply_group(
    cfg: Settings, recs: list[Recommendation], ex: Executor, journal: Journal, round_no: int, done: Applied
) -> None:
    """Validate ``recs`` (one layer) on ``ex.target``, snapshot, apply and verify; restore on failure."""
    tgt, sid, layer = ex.target, ex.session_id, recs[0].layer
    verdict = _validate(cfg, tgt, layer, recs)
    journal.append(sid, "verdict", verdict.model_dump(mode="json"), round_no)
    if not verdict.ok:
        raise ApplyRefused("the validator refused the set (nothing changed):\n" + verdict.feedback())
    safe = tgt.snapshot(list(tgt.catalog().knobs), label="before agenticdb apply")
    try:
        restarted, effective = ex.apply(verdict.changes, verdict.apply_requirement, round_no, safe, purpose="advice")
    except (TargetError, ServiceError, OSError) as exc:
        result = Recovery(tgt).recover(None, safe)
        journal.append(sid, "recovery", result.model_dump(mode="json"), round_no)
        state = "restored and verified" if result.verified else "NOT verified: check the server"
        raise ApplyRefused(f"applying failed: {exc}; the values from before were {state}") from exc
    journal.close_intent(sid, round_no, "applied by agenticdb apply (kept)")
    done.effective.update(effective)
    done.restarted = done.restarted or restarted
    log.info("apply.done", session=sid, layer=layer.value, values=effective, reason="chosen recommendations")
