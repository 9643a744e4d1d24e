"""Approval mode of the service: proposals wait in a queue directory the daemon owns (issue 16).

``policy.mode = "approve"``: the daemon's tuning session waits before each trial (:meth:`Desk.gate`): the
round's validated change set is queued and applied only when approved; rejected or expired, it is fed back
to the planner as a failed ``approval`` check. With ``daemon.approve_source = "advice"`` the daemon
instead computes advice (:func:`agenticdb.advice.advise.advise`) and writes one proposal per accepted
recommendation, applied like ``agenticdb apply`` when approved, and — when the advice found a dominant
cause no setting fixes (issue 40) — one for that cause's non-destructive remedy, run through
``[remediation] dsn`` and verified when approved, as the session's gate does (``advice.remedy_gate``).
``policy.mode = "advise"``: the same proposals, but the daemon never applies them (``agenticdb apply``
is the person's tool then).

Layout of ``daemon.approval_dir`` (default ``<home>/approvals``), created by the daemon:

=====================  ======  =====================================================================
path                   mode    holds
=====================  ======  =====================================================================
``./``                 2770    setgid, group ``daemon.approval_group`` (when set)
``proposals/ID.json``  2750    what waits: recommendation, created, expires (written by the daemon)
``decisions/ID.json``  2770    ``approve``/``reject`` written by ``agenticdb approve|reject``
``rejected/ID.json``   2750    rejected ids, never proposed again until the file is removed
=====================  ======  =====================================================================

The daemon trusts the *owner* of a decision file, not its content: the OS user it journals is the
file's owner, and that user must be root or a member of ``daemon.approval_group``.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import BaseModel

from agenticdb.advice.advise import advise
from agenticdb.advice.apply import apply_recommendations
from agenticdb.advice.remediation import remedy_recommendation, run_approved, runnable_remedy
from agenticdb.advice.types import Advice, AdviceParts, Recommendation, stable_id
from agenticdb.config import Settings
from agenticdb.invocation import command
from agenticdb.models import Proposal, Verdict
from agenticdb.rootcause import Finding as CauseFinding
from agenticdb.rootcause import Remedy
from agenticdb.rootcause.remedy import RemedyError
from agenticdb.store.journal import Journal
from agenticdb.store.lock import LockError, TargetLock
from agenticdb.units.text import clip

log = structlog.get_logger(__name__)


class ApprovalError(ValueError):
    """A decision cannot be recorded (unknown or expired id, not allowed); the message says which."""


class Pending(BaseModel):
    """One proposal waiting for a decision. Times are Unix seconds."""

    id: str
    created_at: float
    expires_at: float
    mode: Literal["approve", "advise"]
    target: str
    recommendation: Recommendation
    kind: Literal["advice", "trial", "remedy"] = "advice"
    """"trial": a tuning session's change set waiting before its trial (``recommendation`` lists the knobs,
    values and evidence joined); "advice": one recommendation of ``agenticdb advise``; "remedy": a root
    cause's statement (``agenticdb.advice.remediation``: ``recommended`` is the SQL)."""
    finding: CauseFinding | None = None
    """The root cause of a "remedy" the daemon's desk queued from advice (``approve_source = "advice"``):
    the desk runs the approved remedy from it. None for the session's remedy, which its gate runs."""

    @property
    def finding_id(self) -> str | None:
        """The root-cause finding a "remedy" fixes (``RC…``, the id ``agenticdb advise`` shows; the
        recommendation of a remedy carries it as its id, :func:`agenticdb.advice.remediation.remedy_recommendation`);
        None for other kinds."""
        if self.kind != "remedy":
            return None
        return self.finding.id if self.finding is not None else self.recommendation.id

    def label(self) -> str:
        """``R7ae97270f7 (finding RCb552f0cb61)`` for a remedy, else the id: how messages name a proposal."""
        return f"{self.id} (finding {self.finding_id})" if self.finding_id else self.id

    def ids(self) -> dict[str, str]:
        """The ids journal events carry: ``{"id": …}`` and, for a remedy, ``"finding": RC…``."""
        return {"id": self.id, **({"finding": self.finding_id} if self.finding_id else {})}


class DecisionFile(BaseModel):
    """What ``agenticdb approve|reject`` writes (``user`` is informational; the file owner counts)."""

    id: str
    decision: Literal["approve", "reject"]
    user: str
    why: str = ""
    at: float


def queue_dir(cfg: Settings) -> Path:
    """``daemon.approval_dir`` or ``<storage.home>/approvals``."""
    return Path(cfg.daemon.approval_dir) if cfg.daemon.approval_dir else cfg.storage.home / "approvals"


def user_name(uid: int) -> str:
    """The login name of ``uid`` (the number as text when it has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def may_decide(uid: int, group: str | None) -> bool:
    """True for root, for anyone when no group is configured, else for members of ``group``
    (primary or supplementary)."""
    if uid == 0 or not group:
        return True
    try:
        g = grp.getgrnam(group)
        pw = pwd.getpwuid(uid)
    except KeyError:
        return False
    return pw.pw_gid == g.gr_gid or pw.pw_name in g.gr_mem


def _write(path: Path, data: BaseModel, mode: int) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(data.model_dump_json(indent=2))
    tmp.chmod(mode)
    tmp.replace(path)


class Queue:
    """The queue directory (see the module docstring). Both the daemon and the CLI use it."""

    def __init__(self, root: Path, group: str | None = None) -> None:
        self.root, self.group = root, group
        self.proposals, self.decisions, self.rejected = root / "proposals", root / "decisions", root / "rejected"

    def create(self) -> None:
        """Create the directories with their modes and group (daemon side).

        Raises:
            ApprovalError: ``daemon.approval_group`` names no group on this host.
        """
        gid = -1
        if self.group:
            try:
                gid = grp.getgrnam(self.group).gr_gid
            except KeyError as exc:
                raise ApprovalError(f"daemon.approval_group = {self.group!r}: no such group on this host") from exc
        for d, mode in (
            (self.root, 0o2770),
            (self.proposals, 0o2750),
            (self.decisions, 0o2770),
            (self.rejected, 0o2750),
        ):
            d.mkdir(parents=True, exist_ok=True)
            os.chown(d, -1, gid)
            d.chmod(mode)

    # ------------------------------------------------------------------------------------ reading
    def pending(self, now: float | None = None) -> list[Pending]:
        """Proposals not yet expired, oldest first."""
        now = time.time() if now is None else now
        out = []
        try:
            files = sorted(self.proposals.glob("*.json")) if self.proposals.exists() else []
        except PermissionError as exc:
            me = user_name(os.getuid())
            raise ApprovalError(
                f"cannot read the approval queue {self.proposals}: {exc.strerror}; user {me} is not in its "
                f"group{f' {self.group!r}' if self.group else ''} (daemon.approval_group)"
            ) from exc
        for f in files:
            try:
                p = Pending.model_validate_json(f.read_text())
            except (OSError, ValueError):
                continue
            if p.expires_at > now:
                out.append(p)
        return sorted(out, key=lambda p: p.created_at)

    def find(self, rid: str) -> Pending:
        """The pending proposal ``rid``: its id, or the finding id (``RC…``) of the one pending remedy that
        carries it (a DBA reads the finding id in ``agenticdb advise``); a unique prefix of either is enough.

        Raises:
            ApprovalError: no such pending proposal (expired, decided, never proposed), the prefix is
                ambiguous, or several pending remedies carry the finding; the message names the pending
                proposals with their finding ids.
        """
        pending = self.pending()
        hits = [p for p in pending if p.id.startswith(rid)]
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise ApprovalError(f"id {rid!r} is ambiguous: {', '.join(p.label() for p in hits)}")
        carry = [p for p in pending if p.finding_id and p.finding_id.startswith(rid)]
        if len(carry) == 1:
            return carry[0]
        if carry:
            raise ApprovalError(
                f"finding {rid!r} is carried by {len(carry)} pending remedies: {', '.join(p.label() for p in carry)}; "
                "name one by its proposal id"
            )
        known = ", ".join(p.label() for p in pending) or "none"
        what = "remedy carries finding" if rid.startswith("RC") else "proposal"
        raise ApprovalError(f"no pending {what} {rid!r} (expired, decided or never proposed); pending: {known}")

    # ------------------------------------------------------------------------------- CLI: decide
    def decide(self, rid: str, decision: Literal["approve", "reject"], why: str = "") -> Pending:
        """Record a decision for the daemon (``agenticdb approve|reject``).

        Raises:
            ApprovalError: unknown/expired id, the proposal is advise-only (approve), or this user is not
                allowed (not root and not in ``daemon.approval_group``).
        """
        p = self.find(rid)
        uid = os.getuid()
        if not may_decide(uid, self.group):
            raise ApprovalError(f"user {user_name(uid)} is not in group {self.group!r} (daemon.approval_group)")
        if decision == "approve" and p.mode == "advise":
            raise ApprovalError(
                f"{p.id}: the daemon runs with policy.mode = 'advise' and never applies; "
                f"use `{command(f'apply {p.id}')}`"
            )
        d = DecisionFile(id=p.id, decision=decision, user=user_name(uid), why=why, at=time.time())
        try:
            _write(self.decisions / f"{p.id}.json", d, 0o640)
        except PermissionError as exc:
            raise ApprovalError(f"cannot write to {self.decisions}: {exc.strerror} (daemon.approval_group)") from exc
        return p

    # ------------------------------------------------------------------------------ daemon side
    def propose(
        self, recs: list[Recommendation], target: str, mode: Literal["approve", "advise"], ttl_s: float
    ) -> list[str]:
        """Write a proposal per recommendation that is not pending or rejected already. Returns new ids."""
        now, new = time.time(), []
        waiting = {p.id for p in self.pending(now)}
        for r in recs:
            if r.verdict != "accept" or r.id in waiting or (self.rejected / f"{r.id}.json").exists():
                continue
            p = Pending(id=r.id, created_at=now, expires_at=now + ttl_s, mode=mode, target=target, recommendation=r)
            _write(self.proposals / f"{r.id}.json", p, 0o640)
            new.append(r.id)
        return new

    def take_decisions(self) -> list[tuple[Pending | None, DecisionFile, str]]:
        """Decision files with their proposal and the owner's name; each file is consumed. A decision of
        a user who may not decide comes back with user ``"refused:<name>"``."""
        out: list[tuple[Pending | None, DecisionFile, str]] = []
        for f in sorted(self.decisions.glob("*.json")):
            try:
                d = DecisionFile.model_validate_json(f.read_text())
                owner = f.stat().st_uid
            except (OSError, ValueError) as exc:
                log.warning("approval.bad_decision_file", path=str(f), error=str(exc))
                f.unlink(missing_ok=True)
                continue
            f.unlink(missing_ok=True)
            who = user_name(owner) if may_decide(owner, self.group) else f"refused:{user_name(owner)}"
            prop = self.proposals / f"{d.id}.json"
            p = Pending.model_validate_json(prop.read_text()) if prop.exists() else None
            out.append((p, d, who))
        return out

    def close(self, p: Pending, rejected: bool) -> None:
        """Remove a decided proposal; a rejected id is remembered in ``rejected/``."""
        if rejected:
            _write(self.rejected / f"{p.id}.json", p, 0o640)
        (self.proposals / f"{p.id}.json").unlink(missing_ok=True)

    def expire(self, now: float | None = None) -> list[Pending]:
        """Remove and return the proposals whose time ran out."""
        now = time.time() if now is None else now
        gone = []
        for f in sorted(self.proposals.glob("*.json")):
            try:
                p = Pending.model_validate_json(f.read_text())
            except (OSError, ValueError):
                continue
            if p.expires_at <= now:
                f.unlink(missing_ok=True)
                gone.append(p)
        return gone


def change_text(p: Pending, compact: bool = False) -> str:
    """What a waiting proposal changes, as ``agenticdb pending`` shows it (``knob: current → recommended``) or,
    ``compact``, the STATUS line (``knob current→recommended``); a remedy, which has no current value, as
    ``cause:object: SQL`` in both."""
    r = p.recommendation
    if r.current is None:
        return f"{r.knob}: {r.recommended}"
    return f"{r.knob} {r.current}→{r.recommended}" if compact else f"{r.knob}: {r.current} → {r.recommended}"


def status_line(pending: list[Pending]) -> str:
    """The systemd STATUS text while proposals wait (at most three named; a remedy, which has no current
    value, as ``id (finding RC…) cause:object: SQL``, named first: the root cause is what the service waits
    on, and the notifier keeps 200 characters of the line)."""
    named = sorted(pending, key=lambda p: p.kind != "remedy")[:3]  # stable: oldest first within each kind
    parts = [f"{p.label()} {change_text(p, compact=True)}" for p in named]
    more = f" (+{len(pending) - 3} more)" if len(pending) > 3 else ""
    return f"awaiting approval: {len(pending)} proposal(s): " + "; ".join(parts) + more


class Desk:
    """The daemon's side of approval mode: propose when due, then act on decisions every tick."""

    def __init__(self, cfg: Settings, parts: AdviceParts) -> None:
        self.cfg = cfg
        self.parts = parts
        self.queue = Queue(queue_dir(cfg), cfg.daemon.approval_group)
        self.queue.create()

    def propose(self, journal: Journal) -> str:
        """Observe the server, advise and queue every accepted recommendation. Returns a summary."""
        cfg = self.cfg
        mode: Literal["approve", "advise"] = "advise" if cfg.policy.mode == "advise" else "approve"
        target = self.parts.build_target(cfg)
        try:
            adv = advise(
                cfg, target, observe_s=cfg.daemon.advice_observe_s, os_layer=cfg.loop.stage != "dbms", parts=self.parts
            )
        finally:
            target.close()
        new = self.queue.propose(adv.recommendations, adv.target, mode, cfg.daemon.proposal_ttl_s)
        for rid in new:
            r = next(r for r in adv.recommendations if r.id == rid)
            journal.append("daemon", "approval.proposed", {"id": rid, "mode": mode, "recommendation": _brief(r)})
        if mode == "approve":
            new += self._propose_remedy(adv, journal)
        log.info("approval.proposed", new=new, reason=f"policy.mode = {mode}")
        return f"{len(new)} new proposal(s) waiting ({mode})"

    def _propose_remedy(self, adv: Advice, journal: Journal) -> list[str]:
        """Queue the remedy of the advice's dominant root cause (issue 40) as the session's gate does
        (``advice.remedy_gate``): only a non-destructive, low-lock one with ``[remediation] dsn`` set, else
        ``remediation.advice_only`` is journaled. Not again while pending or once rejected. Returns the new id."""
        top = (adv.root_cause or {}).get("dominant")
        if not top:
            return []
        finding = CauseFinding.model_validate(top)
        remedy = offerable_remedy(self.cfg, journal, "daemon", finding, None)
        if remedy is None:
            return []
        pid = stable_id("R", adv.target, finding.id, remedy.sql)
        if any(p.id == pid for p in self.queue.pending()) or (self.queue.rejected / f"{pid}.json").exists():
            return []
        queue_remedy(
            self, journal, "daemon", None, pid=pid, target=adv.target, finding=finding, remedy=remedy, keep_finding=True
        )
        return [pid]

    def tick(self, journal: Journal) -> str | None:
        """Expire, then apply approved and drop rejected proposals. Returns the STATUS line while
        proposals wait (None when nothing waits)."""
        for p in self.queue.expire():
            journal.append("daemon", "approval.expired", {**p.ids(), "recommendation": _brief(p.recommendation)})
            log.info("approval.expired", **p.ids(), reason="proposal_ttl_s elapsed without a decision")
        for prop, d, who in self.queue.take_decisions():
            self._act(journal, prop, d, who)
        pending = self.queue.pending()
        return status_line(pending) if pending else None

    def gate(
        self, journal: Journal, should_stop: Callable[[], bool], status: Callable[[str], object]
    ) -> Callable[[str, int, Proposal, Verdict], str | None]:
        """The session's approval gate (``TuningSession(approve=...)``): queue the round's change set and
        wait for a decision. Returns None when approved, else why not (rejected, expired, stopping)."""

        def wait(session_id: str, round_no: int, proposal: Proposal, verdict: Verdict) -> str | None:
            p = self._trial_pending(session_id, round_no, proposal, verdict)
            _write(self.queue.proposals / f"{p.id}.json", p, 0o640)
            brief = _brief(p.recommendation)
            journal.append(
                session_id, "approval.proposed", {"id": p.id, "kind": "trial", "recommendation": brief}, round_no
            )
            log.info("approval.waiting", id=p.id, changes=brief["recommended"], reason="policy.mode = approve")
            while True:
                if any(g.id == p.id for g in self.queue.expire()):
                    journal.append(session_id, "approval.expired", {"id": p.id, "recommendation": brief}, round_no)
                    return f"expired after {self.cfg.daemon.proposal_ttl_s:g} s without a decision"
                for prop, d, who in self.queue.take_decisions():
                    if prop is None or prop.id != p.id:
                        self._act(journal, prop, d, who)
                        continue
                    if who.startswith("refused:"):
                        journal.append(session_id, "approval.ignored", {"id": p.id, "user": who}, round_no)
                        continue
                    event = "approval.approved" if d.decision == "approve" else "approval.rejected"
                    data = {"id": p.id, "user": who, "why": d.why, "recommendation": brief}
                    journal.append(session_id, event, data, round_no)
                    self.queue.close(p, rejected=d.decision == "reject")
                    return None if d.decision == "approve" else f"rejected by {who}: {d.why or 'no reason given'}"
                if should_stop():
                    self.queue.close(p, rejected=False)
                    return "the service is stopping"
                status(status_line(self.queue.pending()))
                time.sleep(0.5)

        return wait

    def _trial_pending(self, session_id: str, round_no: int, proposal: Proposal, verdict: Verdict) -> Pending:
        changes = verdict.changes
        now = time.time()
        rec = Recommendation(
            id=stable_id("T", session_id, str(round_no), *(f"{c.name}={c.value}" for c in changes)),
            knob=", ".join(c.name for c in changes),
            layer=proposal.layer,
            current=", ".join(str(c.previous) for c in changes),
            recommended=", ".join(c.value for c in changes),
            apply=verdict.apply_requirement,
            bottleneck=proposal.bottleneck.value,
            rule=f"session {session_id} round {round_no}",
            reason=proposal.rationale,
            source=f"{proposal.planner} planner",
            effect="; ".join(proposal.intended_effects),
            risk="; ".join(proposal.risks),
            evidence=proposal.evidence[:5],
            confidence="diagnosis",
            confidence_origin="measured trial: kept only if the auditor's paired runs show a gain",
        )
        ttl = self.cfg.daemon.proposal_ttl_s
        return Pending(
            id=rec.id,
            created_at=now,
            expires_at=now + ttl,
            mode="approve",
            target=session_id,
            recommendation=rec,
            kind="trial",
        )

    def _act(self, journal: Journal, p: Pending | None, d: DecisionFile, who: str) -> None:
        base: dict[str, Any] = {**(p.ids() if p is not None else {"id": d.id}), "user": who, "why": d.why}
        if (
            p is None
            or who.startswith("refused:")
            or (d.decision == "approve" and p.mode == "advise")
            or p.kind == "trial"
            or (p.kind == "remedy" and p.finding is None)  # the session's: its gate decides
        ):
            why = "no such pending proposal" if p is None else "not allowed by policy/group"
            journal.append("daemon", "approval.ignored", {**base, "decision": d.decision, "reason": why})
            log.warning("approval.ignored", id=d.id, user=who, reason=why)
            return
        if d.decision == "reject":
            self.queue.close(p, rejected=True)
            journal.append("daemon", "approval.rejected", {**base, "recommendation": _brief(p.recommendation)})
            log.info("approval.rejected", **p.ids(), user=who, reason=d.why or "no reason given")
            return
        journal.append("daemon", "approval.approved", {**base, "recommendation": _brief(p.recommendation)})
        self.queue.close(p, rejected=False)
        summary = self._remedy(journal, p) if p.kind == "remedy" else self._apply(p, who)
        journal.append("daemon", "approval.applied", {**base, "result": summary})
        log.info("approval.applied", **p.ids(), user=who, reason=summary)

    def _apply(self, p: Pending, who: str) -> str:
        target = self.parts.build_target(self.cfg)
        try:
            done = apply_recommendations(self.cfg, target, [p.recommendation], who=who, parts=self.parts)
        except Exception as exc:  # noqa: BLE001 - a failed apply is journaled; the service goes on
            return f"failed: {exc}"
        finally:
            target.close()
        return f"applied in session {done.session_id}: {json.dumps(done.effective)}"

    def _remedy(self, journal: Journal, p: Pending) -> str:
        """Run an approved remedy the desk queued (``p.finding`` set) under the target lock, through
        ``[remediation] dsn`` (:func:`agenticdb.advice.remediation.run_approved`: checked again, verified,
        journaled as ``remediation``). Returns the summary; a failure is the summary, never raised."""
        assert p.finding is not None
        remedy = next((r for r in p.finding.remedies if r.sql == p.recommendation.recommended), None)
        if remedy is None:
            return f"failed: finding {p.finding.id} has no remedy {p.recommendation.recommended!r}"
        lock = TargetLock(self.cfg.storage.home, self.cfg.target.dsn or "")
        try:
            lock.acquire()
        except LockError as exc:  # a live session tunes the target: journaled, not run
            return f"failed: {exc}"
        try:
            rec = run_approved(self.cfg, journal, "daemon", p.finding, remedy)
        except Exception as exc:  # noqa: BLE001 - a failed remedy is journaled; the service goes on
            return f"failed: {clip(exc, 300)}"
        finally:
            lock.release()
        return f"remediation {remedy.sql}: {rec['result']}, verified {rec['verified']}"


def offerable_remedy(
    cfg: Settings, journal: Journal, session_id: str, finding: CauseFinding, round_no: int | None
) -> Remedy | None:
    """The remedy of ``finding`` that may wait for approval (:func:`agenticdb.advice.remediation.runnable_remedy`),
    or None after journaling ``remediation.advice_only`` with why (shared by the session's gate and the desk)."""
    try:
        return runnable_remedy(finding, cfg.remediation.dsn)
    except RemedyError as exc:
        journal.append(session_id, "remediation.advice_only", {"finding": finding.id, "reason": str(exc)}, round_no)
        log.info("remediation.advice_only", finding=finding.id, reason=str(exc))
        return None


def queue_remedy(
    desk: Desk,
    journal: Journal,
    session_id: str,
    round_no: int | None,
    *,
    pid: str,
    target: str,
    finding: CauseFinding,
    remedy: Remedy,
    keep_finding: bool,
) -> Pending:
    """Write ``remedy`` of ``finding`` as the "remedy" proposal ``pid`` into ``desk``'s queue (ttl
    ``daemon.proposal_ttl_s``) and journal ``approval.proposed`` under ``session_id``/``round_no``.
    ``keep_finding``: the proposal carries the finding, so the desk runs it when approved (the session's gate
    runs its own and leaves it out). Shared by the session's gate and the desk."""
    now = time.time()
    p = Pending(
        id=pid,
        created_at=now,
        expires_at=now + desk.cfg.daemon.proposal_ttl_s,
        mode="approve",
        target=target,
        recommendation=remedy_recommendation(finding, remedy),
        kind="remedy",
        finding=finding if keep_finding else None,
    )
    _write(desk.queue.proposals / f"{p.id}.json", p, 0o640)
    brief = {"finding": finding.id, "sql": remedy.sql, "lock_impact": remedy.lock_impact}
    journal.append(session_id, "approval.proposed", {**p.ids(), "kind": "remedy", "remedy": brief}, round_no)
    return p


def _brief(r: Recommendation) -> dict[str, Any]:
    return {"knob": r.knob, "current": r.current, "recommended": r.recommended, "apply": r.apply.value, "rule": r.rule}
