"""Advice without change: what agenticdb would recommend for a server, for a person to apply (issue 16).

:func:`advise` reads the hardware, the configuration in effect and a short observation window of runtime
statistics (two samples ``observe_s`` seconds apart, no benchmark, nothing written), then asks the same
parts a tuning session asks:

* the diagnosis (:func:`agenticdb.planner.diagnosis.diagnose`) of the observation window;
* the playbook (``catalogs/playbook-*.toml``): bad-start floors and known traps, the moves of every
  bottleneck the diagnosis scores, and host sizing rules for memory-sized knobs ("rule only");
* the nearest experiences of the Memory Book (directions that helped on a similar fingerprint);
* the validator (:func:`agenticdb.validation.validator.validate`), each recommendation on its own, with the
  ``--start-from`` relaxation (no step bound: a person applies the value, not a tuning round).

Each :class:`Recommendation` has a stable id: a hash of (target identity, knob, rule), so the same
recommendation on the same server keeps its id across runs. :class:`Finding` lists what is not a knob
change (durability relaxed, pg_stat_statements missing, THP always, swap in use), with a severity.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import structlog

from agenticdb.advice.findings import Query, findings
from agenticdb.advice.remediation import root_cause_advice
from agenticdb.advice.sizing import advised_reference, hold_to_reference, judge_set, without_no_ops
from agenticdb.advice.types import (
    SEVERITIES,
    Advice,
    AdviceParts,
    Recommendation,
    Severity,
    stable_id,
)
from agenticdb.advice.workload_class import AdvisedClass, advised_class, class_free
from agenticdb.config import Settings
from agenticdb.config.sections import PolicyConfig
from agenticdb.dialect import dsn_location, family_of
from agenticdb.host.hardware import detect_hardware
from agenticdb.loop.executor import merge_states
from agenticdb.loop.rootcause_step import dsn_database, probe_dsn, record, watcher_for
from agenticdb.models import (
    ApplyMode,
    Bottleneck,
    Catalog,
    Change,
    Hardware,
    KnobSpec,
    Layer,
    Observed,
    Proposal,
    RuntimeProfile,
    RuntimeState,
    StateDelta,
)
from agenticdb.models.planning import Experience, Fingerprint, PlanningContext
from agenticdb.planner.access import class_call
from agenticdb.planner.diagnosis import Hypothesis, diagnose
from agenticdb.planner.heuristic import HeuristicPlanner
from agenticdb.planner.moves import Move
from agenticdb.planner.playbook import HostFacts, load_playbook, round_base, size
from agenticdb.rootcause import RootCauses, first_row
from agenticdb.store.memory import MemoryBook
from agenticdb.targets.base import Target
from agenticdb.units import format_value, parse_value
from agenticdb.units.people import for_people
from agenticdb.validation.validator import validate

log = structlog.get_logger(__name__)

CONFIDENCE_ORIGINS = {
    "measured": "measured on this host (same DBMS, version, memory and CPUs) in an earlier session",
    "experience": "experience from a similar host (Memory Book fingerprint match)",
    "diagnosis": "rule of the playbook, backed by this server's runtime statistics",
    "rule": "rule only (no runtime evidence in the observation window)",
}
IDLE_HOST_ORIGIN = (
    "rule only: a playbook move for host statistics seen while the database server was idle in the observation "
    "window (no load seen), so they are not evidence about its workload"
)
"""``confidence_origin`` of an OS move whose hypothesis was scored on an idle server (confidence "rule")."""
"""What each confidence level rests on, shown beside every recommendation."""

MIN_SCORE = 0.15
"""Hypotheses scoring below this get no diagnosis-driven moves (HeuristicPlanner's default)."""


# ------------------------------------------------------------------------------------------ identity

#: The maintenance database a sandbox's own DSN names (PostgreSQL: "postgres"; MariaDB: none).
_MAINTENANCE_DATABASES = (None, "postgres")


def advised_database(cfg: Settings) -> str | None:
    """The database ``advise`` probes for root causes: the one the DSN names; on a sandbox whose DSN names
    only the maintenance database, the workload's (``target.database``, where the sandbox's tables live:
    ``advise --sandbox postgres`` after a tune looked at an empty ``postgres`` database)."""
    named = dsn_database(cfg)
    if cfg.target.sandbox is not None and named in _MAINTENANCE_DATABASES:
        return cfg.target.database
    return named


def target_identity(kind: str, dsn: str) -> str:
    """``kind:host:port/database`` of a DSN (URL or ``key=value`` form), without user or password: the
    part of a recommendation id that names the server."""
    host, port, db = dsn_location(dsn)
    return f"{kind}:{host}:{port}/{db}"


# -------------------------------------------------------------------------------------- observation
def observe(sources: list[Callable[[], RuntimeState]], seconds: float) -> StateDelta:
    """Two samples of every source ``seconds`` apart (no load is generated): the counter deltas and the
    later gauges. A source that fails contributes nothing."""

    def sample() -> RuntimeState:
        got = []
        for s in sources:
            try:
                got.append(s())
            except Exception as exc:  # noqa: BLE001 - statistics are evidence; a missing source is not fatal
                log.warning("advise.sample_failed", error=str(exc))
        return merge_states(*got) if got else RuntimeState()

    before = sample()
    time.sleep(max(0.0, seconds))
    return StateDelta.between(before, sample())


def host_fingerprint(kind: str, version_major: str, hardware: Hardware) -> Fingerprint:
    """A fingerprint for Memory Book retrieval when no workload is known (an OLTP guess at half reads;
    :func:`agenticdb.advice.workload_class.advised_class` says which class advise then uses)."""
    return Fingerprint(
        dbms=kind,
        version_major=version_major,
        benchmark="observed",
        workload_class="oltp",
        read_fraction=0.5,
        memory_gib=round(hardware.memory_limit_bytes / 2**30, 1),
        cpu_count=hardware.cpu_count,
    )


def _same_host(fp: Fingerprint, exp: Experience) -> bool:
    o = exp.fingerprint
    return (o.dbms, o.version_major, o.memory_gib, o.cpu_count) == (
        fp.dbms,
        fp.version_major,
        fp.memory_gib,
        fp.cpu_count,
    )


# ------------------------------------------------------------------------------------ the advisor
class Advisor:
    """Builds recommendations for one layer of one target from the planner's playbook and memory.

    Args:
        catalog: the target's knobs (the DBMS's or the Linux host's).
        hardware: the host as the DBMS sees it.
        current: effective values of every catalog knob.
        delta: the observation window.
        family: "postgresql" | "mariadb" | "mysql" | "linux".
        identity: :func:`target_identity` of the server (ids are derived from it).
        experience: retrieved experiences (nearest first).
        fingerprint: this server's fingerprint (to tell "measured here" from "similar host").
    """

    def __init__(
        self,
        catalog: Catalog,
        hardware: Hardware,
        current: dict[str, str],
        delta: StateDelta,
        family: str,
        identity: str,
        experience: list[Experience],
        fingerprint: Fingerprint,
    ) -> None:
        self.catalog, self.hardware, self.current, self.delta = catalog, hardware, current, delta
        self.family, self.identity, self.experience, self.fp = family, identity, experience, fingerprint
        self.layer = Layer.os if family == "linux" else Layer.dbms
        self.planner = HeuristicPlanner()
        self.ctx = PlanningContext(
            profile=RuntimeProfile(
                target=catalog.target, dbms_version=catalog.version, hardware=hardware, current_config=current
            ),
            fingerprint=fingerprint,
            catalog=catalog,
            stage=self.layer,
            experience=experience,
            current_config=current,
            last_delta=delta,
            max_changes=1000,
            max_step_factor=1e12,  # a person applies the value: no tuning-round step bound
            allow_restart=True,
        )

    def hypotheses(self) -> list[Hypothesis]:
        """The diagnosis of the observation window for this layer."""
        return diagnose(self.delta, self.ctx.profile, self.family, self.layer)

    def recommendations(self, hyps: list[Hypothesis]) -> list[Recommendation]:
        """Floors and traps, diagnosis-driven moves, experience seeds and host sizing, one per knob (the
        first source wins, in that order)."""
        p, ctx, cur = self.planner, self.ctx, self.current
        book = load_playbook(self.family)
        facts = _facts(self.hardware, cur)
        hist = p.history(ctx, cur)
        out: dict[str, Recommendation] = {}
        by_b = {h.bottleneck: h for h in hyps}
        for m in p.floor_moves(ctx, book, cur, facts, self.family, hist):
            sev: Severity = "high" if m.trap else "medium"
            kind = "trap" if m.trap else "floor"
            out.setdefault(m.name, self._rec(m, f"{kind}:{m.name}", sev, "rule", [self._now(m)]))
        busy = self.server_busy()
        # Idle server: host pressure is no evidence about it. DBMS moves are left out; OS moves stay (the
        # host's own state) but say they rest on the rule alone.
        for h in hyps if busy or self.layer == Layer.os else []:
            if h.score < MIN_SCORE:
                continue
            for m in p.entry_moves(ctx, book, h, cur, facts, self.family, hist):
                sev = "medium" if h.score >= 0.5 else "low"
                ev = [f"{h.bottleneck.value} (score {h.score:.2f}): {e}" for e in h.evidence[:3]]
                rec = self._rec(m, f"entry:{h.bottleneck.value}:{m.name}", sev, "diagnosis" if busy else "rule", ev)
                if not busy:
                    rec.confidence_origin = IDLE_HOST_ORIGIN
                log.info(
                    "advise.confidence",
                    knob=m.name,
                    confidence=rec.confidence,
                    reason="server busy in the window" if busy else "server idle in the window: rule only",
                )
                out.setdefault(m.name, rec)
        for m in p.seed_moves(ctx, cur, self.family, hist, by_b, taken=set(out)):
            exp = next((e for e in self.experience if e.session_id in m.source), None)
            conf = "measured" if exp is not None and _same_host(self.fp, exp) else "experience"
            out.setdefault(m.name, self._rec(m, f"experience:{m.name}", "low", conf, [m.reason]))
        for m in self._sizing(book, facts, hist, set()):
            have = out.get(m.name)
            if have is None:
                sev = "medium" if _far_below(m) else "info"
                out[m.name] = self._rec(m, f"sizing:{m.name}", sev, "rule", [self._now(m)])
            elif have.rule.startswith("floor:") and _larger(m, have.recommended):
                # the floor says "too small"; the sizing rule says how large a DBA would start
                have.recommended = self._people(m.spec, m.value)
                have.evidence.append(f"sized by the playbook: {m.reason} ({m.source})")
        return list(out.values())

    def server_busy(self, min_rate: float = 5.0, min_count: float = 20.0) -> bool:
        """True when the server did work in the window (at least ``min_count`` transactions or statements
        and ``min_rate`` per second, so agenticdb's own sampling queries never count as load, or an active
        session): only then is host pressure evidence about *this* server. The same test for both layers:
        the OS advisor's window holds the database's counters too (:func:`advise` merges them); a window
        without them saw no load."""
        d = self.delta
        names = ("pg_stat_database.xact_commit", "pg_stat_database.xact_rollback", "global_status.Questions")
        total = sum(d.totals.get(k, 0.0) for k in names)
        busy = total >= max(min_count, min_rate * d.seconds)
        return busy or d.gauges.get("pg_stat_activity.active", 0.0) > 0

    def _sizing(self, book: object, facts: HostFacts, hist: object, taken: set[str]) -> list[Move]:
        """Memory- and CPU-sized first values of the playbook's "up" entries where the value in effect is
        below 1/2 of it (what PGTune-like tools recommend; here labelled rule only)."""
        moves: list[Move] = []
        for e in getattr(book, "entry", []):
            if e.direction != "up" or e.first is None or e.knob in taken or "<dev>" in e.knob:
                continue
            if e.first.fraction_of_memory is None and e.first.fraction_of_ram is None and e.first.per_cpu is None:
                continue
            spec = self.catalog.get(e.knob)
            raw = self.current.get(e.knob, spec.default if spec else None)
            cur = parse_value(raw, spec) if spec is not None and raw is not None else None
            first = size(e.first, facts, spec, cur) if spec is not None else None
            if spec is None or cur is None or first is None or any(m.name == e.knob for m in moves):
                continue
            target = round_base(first, spec)
            if cur >= target / 2:
                continue
            value = format_value(target, spec, self.family)
            moves.append(Move(e.knob, value, spec, e.bottleneck, raw, e.effect, e.risk, e.reason, e.source))
        return moves

    def _people(self, spec: KnobSpec, value: str | float | None) -> str:
        """A value as the DBA writes it in this server's configuration (MariaDB sizes "128M", not bytes)."""
        return for_people(self.family, spec, value if value is None or isinstance(value, str) else str(value))

    def _now(self, m: Move) -> str:
        """The evidence line of a rule-only move: the value in effect."""
        return f"{m.name} = {self._people(m.spec, m.current)}"

    def _rec(self, m: Move, rule: str, sev: Severity, conf: str, evidence: list[str]) -> Recommendation:
        return Recommendation(
            id=stable_id("R", self.identity, m.name, rule),
            knob=m.name,
            layer=self.layer,
            current=self._people(m.spec, m.current) if m.current is not None else None,
            recommended=self._people(m.spec, m.value),
            apply=m.spec.apply,
            bottleneck=m.bottleneck.value,
            rule=rule,
            reason=m.reason,
            source=m.source,
            effect=m.effect,
            risk=m.risk or ("needs a server restart" if m.spec.apply == ApplyMode.restart else ""),
            evidence=evidence,
            severity=sev,
            confidence=conf,  # type: ignore[arg-type]
            confidence_origin=CONFIDENCE_ORIGINS[conf],
            option_file=m.spec.option_file,
        )


SIZING_FAR_FACTOR = 8.0
"""A value in effect at most 1/8 of what the playbook's host sizing gives (shared_buffers 128MB against
6 GB on a 24 GiB host) is a medium finding, not information: the server's shipped default is sized for a
minimal machine (PostgreSQL manual, 20.4.1: "the default is typically 128 megabytes ... a reasonable
starting value for shared_buffers is 25% of the memory")."""


def _far_below(m: Move) -> bool:
    """True when the recommended size is at least ``SIZING_FAR_FACTOR`` × the value in effect."""
    a, b = parse_value(str(m.value), m.spec), parse_value(m.current, m.spec) if m.current else None
    return a is not None and b is not None and b > 0 and a >= SIZING_FAR_FACTOR * b


def _larger(m: Move, other: str) -> bool:
    a, b = parse_value(str(m.value), m.spec), parse_value(other, m.spec)
    return a is not None and b is not None and a > b


def _facts(hw: Hardware, current: dict[str, str]) -> HostFacts:
    return HostFacts.of(hw, current)


def advice_policy(policy: PolicyConfig, n: int) -> PolicyConfig:
    """The policy recommendations are validated under: the configured one without the tuning loop's step
    bound and change count (as for ``tune --start-from``: a person applies a value, not a trial step)."""
    return policy.model_copy(update={"max_changes": max(n, 1), "max_step_factor": 1e12})


def judge(
    recs: list[Recommendation],
    catalog: Catalog,
    current: dict[str, str],
    hardware: Hardware,
    policy: PolicyConfig,
    can_restart: bool,
) -> None:
    """Fill ``verdict``/``verdict_detail`` (and the verified apply mode) of each recommendation, validated
    on its own."""
    for r in recs:
        proposal = Proposal(
            bottleneck=Bottleneck.unknown, layer=r.layer, changes=[Change(name=r.knob, value=r.recommended)]
        )
        v = validate(
            proposal,
            catalog,
            current,
            hardware,
            advice_policy(policy, 1),
            r.layer,
            can_restart=can_restart,
        )
        if v.ok:
            r.verdict, r.apply = "accept", v.apply_requirement
            r.verdict_detail = "; ".join(v.accepted_risks) or "accepted"
        else:
            r.verdict = "reject"
            r.verdict_detail = "; ".join(f"[{f.check}] {f.message}" for f in v.failed)


# ------------------------------------------------------------------------------------------ entry
def advise(
    cfg: Settings, target: Target, observe_s: float = 5.0, os_layer: bool = True, *, parts: AdviceParts
) -> Advice:
    """Recommendations and findings for ``target`` (see the module docstring). Changes nothing.

    Args:
        cfg: settings (policy for the validator, storage for the Memory Book, ``[os]`` for the host).
        target: the DBMS target (must accept connections).
        observe_s: seconds between the two statistics samples.
        os_layer: also advise Linux sysctl/block parameters of the host.
        parts: the builders of the wiring (``app.advice_parts()``): host statistics, the Linux target.

    Raises:
        TargetError / psycopg / PyMySQL errors: the server stopped answering while being read.
    """

    catalog = target.catalog()
    hardware = detect_hardware(target.data_dir, pid=target.server_pid())
    current = target.current_values(list(catalog.knobs))
    identity = target_identity(target.kind, cfg.target.dsn or "")
    sources: list[Callable[[], RuntimeState]] = [target.runtime_state]
    host = parts.host_state_source(cfg, target)
    if host is not None:
        sources.append(host)
    # root causes no setting fixes, over the same window (issue 40), in the database the DBA named in the
    # DSN: advise observes that server as it is, not a benchmark database of a tuning session
    probed = advised_database(cfg)
    watcher = watcher_for(cfg, target, probed)
    since_reset = _since_reset(target)
    delta = observe(sources, observe_s)
    causes = watcher.finish() if watcher is not None else None
    guess = host_fingerprint(target.kind, target.version_major(), hardware)
    ac = advised_class(cfg.storage.memory_db, guess, since_reset)
    fp = guess.model_copy(update={"workload_class": ac.cls})
    experience = _retrieve(cfg, fp)
    family = family_of(catalog.target)
    adv = Advisor(catalog, hardware, current, delta, family, identity, experience, fp)
    hyps = adv.hypotheses()
    recs, class_notes = _class_free(adv, ac, hyps, adv.recommendations(hyps))

    def judged(rs: list[Recommendation]) -> None:
        judge(rs, catalog, current, hardware, cfg.policy, target.can_restart())

    ref = advised_reference(recs, adv.ctx, cfg.policy, catalog, judged)  # sized from the values advised
    if ref is not None:
        hold_to_reference(recs, ref, catalog)
        recs = without_no_ops(recs, catalog)
    judged(recs)
    observed = Observed(gauges=dict(delta.gauges), read=target.rule_gauges)
    set_notes = judge_set(recs, catalog, current, hardware, cfg.policy, target.can_restart(), observed)
    all_hyps = list(hyps)
    if os_layer:
        os_recs, os_hyps, os_notes = _os_advice(cfg, target, hardware, delta, identity, fp, parts, ac)
        recs += os_recs
        all_hyps += os_hyps
        class_notes += os_notes
    busy = adv.server_busy()
    found = findings(
        family_of(catalog.target),
        target.current_values,
        hardware,
        delta,
        identity,
        Path(cfg.os.root),
        query=_evidence_query(cfg, target, probed),
    )
    cause_findings, cause_notes = root_cause_advice(causes, recs, cfg.remediation.dsn)
    found += cause_findings
    for r in recs:
        log.info("advise.recommended", id=r.id, knob=r.knob, value=r.recommended, verdict=r.verdict, reason=r.rule)
    return Advice(
        target=identity,
        kind=target.kind,
        version=catalog.version,
        generated_at=datetime.now(UTC).isoformat(timespec="seconds"),
        observed_s=round(delta.seconds, 2),
        hardware={
            "cpu_count": hardware.cpu_count,
            "memory_limit_bytes": hardware.memory_limit_bytes,
            "data_device": hardware.data_device,
            "swap_bytes": hardware.swap_bytes,
        },
        # an idle window's scores are no finding about the server: none are given (issue: advise printed
        # "os:memory_reclaim 0.672" and then said the server was idle)
        diagnosis=[
            {"bottleneck": h.bottleneck.value, "layer": h.layer.value, "score": h.score, "evidence": h.evidence[:2]}
            for h in all_hyps
            if h.score > 0 and busy
        ],
        idle=not busy,
        recommendations=sorted(recs, key=lambda r: (r.layer.value, -SEVERITIES.index(r.severity), r.knob)),
        findings=found,
        notes=[ac.note]
        + (_window_class(delta, ac) if busy else [])
        + class_notes
        + _probed_note(causes, probed, dsn_database(cfg))
        + cause_notes
        + set_notes
        + ([] if busy else [_idle_note(delta.seconds)]),
        root_cause=record(causes) if causes is not None else None,
    )


def _probed_note(causes: RootCauses | None, asked: str | None, named: str | None) -> list[str]:
    """Which database the root causes were read in and why (none without a root-cause pass): ``asked`` is
    :func:`advised_database`'s choice, ``named`` the database target.dsn names."""
    if causes is None:
        return []
    where = f"database {causes.database!r}" if causes.database else "every schema (no default schema)"
    if asked and asked != named:
        why = f"the sandbox's workload database; target.dsn names the maintenance database {named!r}"
    else:
        why = "named in target.dsn" if asked else "target.dsn names none: the connection's default"
    return [f"root causes probed in {where} ({why})"]


def _evidence_query(cfg: Settings, target: Target, database: str | None) -> Query | None:
    """Runs a finding rule's read-only evidence query in ``database`` of the target (None: no DSN)."""
    dsn = probe_dsn(cfg, target)
    if not dsn:
        return None
    return lambda sql: first_row(target.kind, dsn, database, sql)


def _idle_note(seconds: float) -> str:
    return (
        f"the server was idle in the {seconds:.1f} s window (< 20 transactions and < 5/s, no active "
        "session): "
        "host pressure is not evidence about it, so no diagnosis-driven DBMS moves and OS moves are rule "
        "only; observe under load with --observe for those"
    )


def _os_advice(
    cfg: Settings,
    target: Target,
    hardware: Hardware,
    delta: StateDelta,
    identity: str,
    fp: Fingerprint,
    parts: AdviceParts,
    ac: AdvisedClass,
) -> tuple[list[Recommendation], list[Hypothesis], list[str]]:
    """Recommendations (judged by the validator), hypotheses and class notes for the Linux host of ``target``."""
    linux = parts.linux_target(cfg, data_dir=target.data_dir)
    os_cat = linux.catalog()
    os_current = linux.current_values(list(os_cat.knobs))
    osa = Advisor(os_cat, hardware, os_current, delta, "linux", identity, [], fp)
    os_hyps = osa.hypotheses()
    os_recs, notes = _class_free(osa, ac, os_hyps, osa.recommendations(os_hyps))
    judge(os_recs, os_cat, os_current, hardware, cfg.policy, True)
    return os_recs, os_hyps, notes


OTHER_CLASS = {"oltp": "olap", "olap": "oltp", "mixed": "olap"}
"""The class an assumed one is checked against (:func:`_class_free`)."""


def _class_free(
    adv: Advisor, ac: AdvisedClass, hyps: list[Hypothesis], recs: list[Recommendation]
) -> tuple[list[Recommendation], list[str]]:
    """``recs`` as they are when the class was measured; under an assumed class, without those the other
    class would not give (advised again from the same hypotheses ``hyps`` with only the fingerprint's class
    changed), with the note naming them."""
    if not ac.assumed:
        return recs, []
    fp = adv.fp.model_copy(update={"workload_class": OTHER_CLASS[ac.cls]})
    other = Advisor(adv.catalog, adv.hardware, adv.current, adv.delta, adv.family, adv.identity, adv.experience, fp)
    kept, note = class_free(recs, other.recommendations(hyps))
    return kept, [note] if note else []


def _since_reset(target: Target) -> StateDelta | None:
    """The server's counters since their last reset, as totals of one window (None: unreadable)."""
    try:
        return StateDelta(totals=dict(target.runtime_state().counters))
    except Exception as exc:  # noqa: BLE001 - the class is then assumed, and said so
        log.warning("advise.counters_unread", error=str(exc)[:200], reason="class from sessions or assumed")
        return None


def _window_class(delta: StateDelta, ac: AdvisedClass) -> list[str]:
    """The observation window's own class call, when it read rows (``[]`` otherwise); only said of a busy
    window (an idle one's rows are advise's own sampling queries)."""
    call = class_call(ac.cls, delta)
    return [f"in the observation window: {call.text(ac.basis)}"] if call.figures is not None else []


def _retrieve(cfg: Settings, fp: Fingerprint) -> list[Experience]:
    path = cfg.storage.memory_db
    if path is None or not path.exists():
        return []
    with MemoryBook(path) as book:
        return [e for _, e in book.retrieve(fp)]
