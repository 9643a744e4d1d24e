"""Context assembly for the LLM planner: a ``PlanningContext`` in, prompt text out.

The prompt is built from text templates in ``agenticdb/planner/prompts/`` (``system.txt``,
``context.txt``, ``repair.txt``, ``schema_hint.txt``) with ``string.Template`` placeholders, so the
wording can be changed without touching code.

Everything that came from outside agenticdb's own logic — query text, server log lines, error
messages of a failed apply, and the free text of validator feedback — is *quoted as data*: control
characters are stripped, each item is truncated, the list is capped, and the items are emitted as a
JSON array whose ``<`` and ``>`` are written as ``\\u003c``/``\\u003e`` so that no item can close the
``<untrusted_data>`` block (or open another one) however it is spelled. The system prompt tells the model
that the block is evidence, never instructions (OWASP Top 10 for LLM Applications, LLM01 "Prompt
Injection": segregate untrusted content and mark it clearly).

The action catalog is rendered one knob a line (name, type, unit, range, apply mode, current value,
first sentence of the description) and only for the current stage, which keeps a full PostgreSQL 15 or
MariaDB 10.11 catalog well inside a 32k-token context (see ``benchmarks/bench_llm_context.py``).
"""

from __future__ import annotations

import importlib
import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from string import Template
from typing import Any

import structlog

from agenticdb.models import Catalog, FailedCheck, KnobSpec, Layer, Measurement, RoundOutcome, StateDelta
from agenticdb.models.planning import Experience, PlanningContext
from agenticdb.planner import access
from agenticdb.units.text import clip

log = structlog.get_logger(__name__)

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"

#: Per-item and item-count caps for untrusted text (one log line or query rarely needs more to be
#: recognisable; the cap bounds what an attacker-controlled log can cost in tokens). Judgement.
MAX_UNTRUSTED_CHARS = 500
MAX_UNTRUSTED_ITEMS = 20
#: Caps that keep the context compact: earlier rounds, experiences, statistics lines, and the first
#: sentence of a knob's description. Judgement; with every cap reached the request is the "full" one
#: benchmarks/bench_llm_context.py counts. These size the prompt and decide no diagnosis, so they live
#: here and not in catalogs/diagnosis-thresholds.toml.
MAX_ROUNDS = 12
MAX_EXPERIENCES = 3
MAX_COUNTERS = 60
MAX_GAUGES = 30
MAX_WAIT_EVENTS = 10
DESCRIPTION_CHARS = 80

# Caps on single pieces of text, in characters. Each is a judgement: long enough that the piece stays
# recognisable to a reader (and the model), short enough that one odd value cannot crowd out the rest;
# none is measured one by one. Their sum with every list cap reached is the "full" request that
# benchmarks/bench_llm_context.py renders and counts.
VALUE_CHARS = 40
"""A knob's value in the catalog and in the best configuration (values are numbers, sizes, enum words;
a longer one — a library list, a path — is cut)."""
CHANGE_CHARS = 60
"""A changed parameter's value in a round line, and a failed check's parameter in its brief."""
HOST_CHARS = 60
"""The host name an experience was learned on."""
REASON_CHARS = 200
"""The decision's reason in a round line (one or two sentences of the auditor)."""
EXPERIENCE_JSON_CHARS = 400
"""Each JSON list of an experience (helped / did not help / failed; the relative best configuration)."""
FEEDBACK_PARAMETER_CHARS = 100
FEEDBACK_VALUE_CHARS = 100
FEEDBACK_MESSAGE_CHARS = 300
FEEDBACK_SOURCE_CHARS = 120
"""Fields of one validator check in the feedback block: parameter, value (echoes model output),
message (may quote server text) and its source (a manual section or rule file)."""
HYPOTHESIS_CHARS = 500
"""The evidence of one bottleneck hypothesis."""
OTHER_HYPOTHESIS_CHARS = 600
"""A hypothesis of another shape (a model's JSON, or its text)."""
FAILURE_LOG_LINES = 5
"""Server log lines kept per failed round (the newest: the reason a start failed is at the end)."""
RECOVERY_LOG_LINES = 3
"""Recovery log lines kept per round (the newest)."""
EXACT_BOUND_BELOW = 1e9
"""A range bound at or above this is written with 3 significant digits (2^31-1, 2^64 …): nothing a
planner proposes needs more, and it saves tokens (judgement)."""

_KEEP_CONTROL = {"\n", "\t"}


@cache
def load_prompt(name: str) -> str:
    """Text of ``prompts/<name>.txt``.

    Raises:
        FileNotFoundError: the prompt file does not exist (the message names the path).
    """
    path = PROMPTS_DIR / f"{name}.txt"
    if not path.is_file():
        raise FileNotFoundError(f"planner prompt file missing: {path}")
    return path.read_text(encoding="utf-8")


def render_prompt(name: str, **values: str) -> str:
    """``prompts/<name>.txt`` with ``$placeholders`` substituted.

    Raises:
        KeyError: a placeholder of the template has no value (names the placeholder).
    """
    return Template(load_prompt(name)).substitute(values)


def strip_control(text: str) -> str:
    """``text`` without control and format characters (Unicode categories Cc, Cf), except newline and
    tab. Removes terminal escapes, NULs and bidirectional overrides that could hide text from a reader."""
    return "".join(ch for ch in text if ch in _KEEP_CONTROL or unicodedata.category(ch) not in ("Cc", "Cf"))


_DELIMITER = re.compile(r"<(\s*/?\s*)(untrusted_data|validator_feedback)", flags=re.IGNORECASE)


def defuse_delimiters(text: str) -> str:
    """``text`` with any spelling of this prompt's block tags (``<untrusted_data>``,
    ``</validator_feedback>`` …) turned into a look-alike (``‹/untrusted_data``) that opens or closes
    nothing. Applied to every piece of foreign text placed outside the JSON-escaped blocks."""
    return _DELIMITER.sub(lambda m: "\u2039" + m.group(1) + m.group(2), text)


def sanitize(text: object, limit: int = MAX_UNTRUSTED_CHARS) -> str:
    """``text`` as a string, control characters stripped, block delimiters defused, cut to ``limit``
    characters (with a marker saying how many were cut)."""
    clean = defuse_delimiters(strip_control(str(text)))
    if len(clean) > limit:
        cut = len(clean) - limit
        clean = clean[:limit] + f"…[{cut} chars truncated]"
    return clean


def _json_data(value: Any) -> str:
    """Compact JSON whose ``<``/``>``/``&`` are \\u-escaped: it decodes to ``value`` exactly but cannot
    contain a markup delimiter such as ``</untrusted_data>``."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def quote_untrusted(
    items: Sequence[str], max_items: int = MAX_UNTRUSTED_ITEMS, max_chars: int = MAX_UNTRUSTED_CHARS
) -> str:
    """Untrusted strings as the body of an ``<untrusted_data>`` block: a JSON array of sanitized strings.

    Keeps the last ``max_items`` items (the newest log lines matter most) and says how many were dropped.
    Returns ``[]`` when there is nothing.
    """
    kept = [sanitize(i, max_chars) for i in items if str(i).strip()]
    dropped = max(len(kept) - max_items, 0)
    kept = kept[-max_items:] if max_items else []
    if dropped:
        kept.insert(0, f"({dropped} earlier items omitted)")
    return _json_data(kept)


def _num(v: float | None) -> str:
    if v is None:
        return "?"
    if float(v).is_integer():
        return str(int(v))
    return f"{v:.6g}"


def _bound(v: float | None) -> str:
    """A range bound: exact below ``EXACT_BOUND_BELOW``; larger bounds (2^31-1, 2^64 …) with 3
    significant digits, which is all a planner needs and saves tokens."""
    if v is not None and abs(v) >= EXACT_BOUND_BELOW:
        mantissa, exponent = f"{v:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    return _num(v)


def first_sentence(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    """First sentence of ``text``, control characters stripped, at most ``limit`` characters."""
    clean = " ".join(defuse_delimiters(strip_control(text)).split())
    head = re.split(r"(?<=[.!?])\s", clean, maxsplit=1)[0]
    return clip(head, limit)


def knob_line(spec: KnobSpec, current: str | None) -> str:
    """One catalog line: ``name | type | unit | range | apply | current | description``."""
    if spec.vartype == "enum" and spec.enum_values:
        rng = "/".join(spec.enum_values)
    elif spec.vartype == "bool":
        rng = "on/off"
    elif spec.min_value is not None or spec.max_value is not None:
        rng = f"{_bound(spec.min_value)}..{_bound(spec.max_value)}"
    else:
        rng = "-"
    cur = "?" if current is None else sanitize(current, VALUE_CHARS)
    parts = [
        spec.name,
        spec.vartype,
        spec.unit or "-",
        rng,
        spec.apply.value,
        cur,
        first_sentence(spec.description),
    ]
    return " | ".join(parts)


def render_catalog(catalog: Catalog, stage: Layer, current: dict[str, str]) -> str:
    """The action catalog of ``stage``, one knob a line, sorted by name.

    Excluded knobs are only counted, not listed: the model may propose only listed names, the validator
    rejects the rest, and listing them would cost ~1.5k (PostgreSQL 15) to ~2.8k (MariaDB 10.11) tokens.
    """
    lines = [knob_line(spec, current.get(name)) for name, spec in sorted(catalog.knobs.items()) if spec.layer == stage]
    if not lines:
        lines.append(f"(no tunable parameters for stage {stage.value})")
    if catalog.excluded:
        lines.append(
            f"({len(catalog.excluded)} further parameters are excluded as unsafe, read-only or "
            "semantics-changing: propose only names listed above)"
        )
    return "\n".join(lines)


def _measurement_line(m: Measurement) -> str:
    parts = [
        f"{m.workload}: objective {m.objective_name}={_num(m.objective)}"
        f" ({'higher' if m.higher_is_better else 'lower'} is better)"
    ]
    if m.tps is not None:
        parts.append(f"tps={_num(m.tps)}")
    if m.latency_p95_ms is not None:
        parts.append(f"p95_ms={_num(m.latency_p95_ms)}")
    if m.total_time_s is not None:
        parts.append(f"total_time_s={_num(m.total_time_s)}")
    if m.errors:
        parts.append(f"errors={m.errors}")
    return ", ".join(parts)


def render_policy(ctx: PlanningContext) -> str:
    """Stage and the safety policy the validator will enforce."""
    return "\n".join(
        [
            f"stage: {ctx.stage.value}",
            f"durability: {ctx.durability}",
            f"max changes this round: {ctx.max_changes}",
            f"max step factor per round: {_num(ctx.max_step_factor)}",
            f"restarts allowed: {'yes' if ctx.allow_restart else 'no'}",
        ]
    )


def render_profile(ctx: PlanningContext) -> str:
    """Versions, hardware, service status, noise and baseline of the target."""
    p, hw = ctx.profile, ctx.profile.hardware
    gib = 1024**3
    lines = [
        f"target: {p.target} {p.dbms_version}; service: {p.service_status}",
        f"cpu: {hw.cpu_count}; memory: {hw.memory_bytes / gib:.1f} GiB; usable memory limit: "
        f"{hw.memory_limit_bytes / gib:.1f} GiB"
        + (f" (cgroup {hw.cgroup_memory_limit_bytes / gib:.1f} GiB)" if hw.cgroup_memory_limit_bytes else ""),
        f"measurement noise (coefficient of variation): {p.noise_cv:.3f}"
        + (" assumed, not measured (one baseline run)" if len(p.baseline) == 1 else ""),
    ]
    if hw.disk_total_bytes:
        lines.insert(
            2,
            f"disk: {hw.disk_free_bytes / gib:.1f} GiB free of {hw.disk_total_bytes / gib:.1f} GiB"
            + (f" on {hw.data_device}" if hw.data_device else ""),
        )
    lines += [f"baseline run {i + 1}: {_measurement_line(m)}" for i, m in enumerate(p.baseline)]
    if ctx.best_config:
        lines.append(
            "best configuration so far: "
            + ", ".join(f"{k}={sanitize(v, VALUE_CHARS)}" for k, v in sorted(ctx.best_config.items()))
        )
    return "\n".join(lines)


def render_fingerprint(ctx: PlanningContext) -> str:
    """The workload fingerprint as ``key=value`` pairs, then what the server counted of its access pattern
    (planner.access: share of rows read by sequential scans, rows scanned per statement)."""
    text = ", ".join(
        f"{k}={_num(v) if isinstance(v, float) else v}" for k, v in ctx.fingerprint.model_dump(mode="json").items()
    )
    fig = access.scan_figures(current_delta(ctx))
    if fig is not None:
        cls = access.workload_class(ctx.fingerprint.workload_class, current_delta(ctx))
        text += (
            f"; measured: {fig[0]:.0%} of rows read by sequential scans, {_num(fig[1])} scanned rows per "
            f"statement (treated as {cls})"
        )
    return text


def current_delta(ctx: PlanningContext) -> StateDelta | None:
    """Runtime-state delta of the latest measured interval (the context's, else the baseline's)."""
    return ctx.last_delta or ctx.profile.baseline_state


def latest_measurement(ctx: PlanningContext) -> Measurement | None:
    """The newest measurement: last round that measured, else the last baseline run."""
    for r in reversed(ctx.rounds):
        if r.measurement is not None:
            return r.measurement
    return ctx.profile.baseline[-1] if ctx.profile.baseline else None


def render_statistics(delta: StateDelta | None) -> str:
    """Counter rates (per second), gauges and top wait events of ``delta``, capped in length."""
    if delta is None:
        return "(no runtime statistics collected yet)"
    rates = [(k, v) for k, v in sorted(delta.per_second.items()) if v]
    gauges = sorted(delta.gauges.items())
    waits = sorted(delta.wait_events.items(), key=lambda kv: -kv[1])[:MAX_WAIT_EVENTS]
    lines = [f"interval: {delta.seconds:.1f} s"]
    lines += [f"{k}={_num(v)}/s" for k, v in rates[:MAX_COUNTERS]]
    if len(rates) > MAX_COUNTERS:
        lines.append(f"({len(rates) - MAX_COUNTERS} more counters omitted)")
    lines += [f"{k}={_num(v)}" for k, v in gauges[:MAX_GAUGES]]
    lines += [f"wait {k}: {v}" for k, v in waits]
    return "\n".join(lines)


def _checks_brief(checks: Iterable[FailedCheck]) -> str:
    return "; ".join(f"[{c.check}] {sanitize(c.parameter, CHANGE_CHARS)}" for c in checks)


def round_line(r: RoundOutcome) -> str:
    """One consolidated line per earlier round (AgenticDB Table 4 style): belief, action, result,
    decision. Failure messages are not inlined: they are in the untrusted data block."""
    changes = ", ".join(f"{k}={sanitize(v, CHANGE_CHARS)}" for k, v in r.changes.items())
    if not changes and r.proposal is not None:
        changes = ", ".join(f"{c.name}={sanitize(c.value, CHANGE_CHARS)}" for c in r.proposal.changes)
    parts = [
        f"round {r.round_no} [{r.stage.value}] bottleneck={r.bottleneck.value}",
        f"changes: {changes or 'none'}",
    ]
    if not r.verdict_ok:
        parts.append(f"rejected by validator ({_checks_brief(r.failed_checks) or 'no details'})")
    if r.failure is not None:
        parts.append(f"failed in {r.failure.phase}" + (f", recovery {r.recovery.action}" if r.recovery else ""))
    if r.objective is not None:
        gain = f", gain vs best {r.gain_vs_best:+.1%}" if r.gain_vs_best is not None else ""
        parts.append(f"objective {_num(r.objective)}{gain}")
    if r.verdict_ok and r.failure is None:
        parts.append("kept" if r.kept else "reverted")
    parts.append(f"decision {r.decision.value}: {sanitize(r.reason, REASON_CHARS)}")
    return " | ".join(parts)


def render_rounds(rounds: Sequence[RoundOutcome]) -> str:
    """Session memory: the last ``MAX_ROUNDS`` consolidated rounds, oldest first."""
    if not rounds:
        return "(first round of this session)"
    shown = list(rounds)[-MAX_ROUNDS:]
    head = [f"({len(rounds) - len(shown)} earlier rounds omitted)"] if len(rounds) > len(shown) else []
    return "\n".join(head + [round_line(r) for r in shown])


def render_experience(experience: Sequence[Experience]) -> str:
    """Retrieved experience, at most ``MAX_EXPERIENCES`` entries, as compact summaries."""
    if not experience:
        return "(none)"
    lines = []
    for e in list(experience)[:MAX_EXPERIENCES]:
        fp = e.fingerprint
        lines.append(
            f"- {fp.dbms} {fp.version_major}, {fp.benchmark} ({fp.workload_class}, read fraction "
            f"{fp.read_fraction:.2f}, scale {_num(fp.scale)}, {fp.concurrency} clients): best gain "
            f"{e.best_gain:+.1%}; recurring bottlenecks: {', '.join(e.recurring_bottlenecks) or '-'}"
        )
        if e.origin is not None:  # issue 19: where it was learned, so sizes can be read relative to that host
            o = e.origin
            lines.append(
                f"  learned on host {sanitize(o.host, HOST_CHARS)}: {o.cpu_count} CPUs, {_num(o.memory_gib)} GiB, "
                f"{o.storage_class} storage"
            )
        for label, entries in (
            ("helped", e.beneficial),
            ("did not help", e.ineffective),
            ("failed", e.failed),
        ):
            if entries:
                lines.append(
                    f"  {label}: " + sanitize(json.dumps(entries, separators=(",", ":")), EXPERIENCE_JSON_CHARS)
                )
        if e.best_config_relative:
            lines.append(
                "  best config (relative to host memory): "
                + sanitize(json.dumps(e.best_config_relative, separators=(",", ":")), EXPERIENCE_JSON_CHARS)
            )
    return "\n".join(lines)


def render_feedback(checks: Sequence[FailedCheck]) -> str:
    """Validator feedback as a delimited JSON array (the ``value`` echoes model output and the
    ``message`` may quote server text, so it is quoted as data, not inlined as prose)."""
    if not checks:
        return "(none)"
    items = [
        {
            "check": c.check,
            "parameter": sanitize(c.parameter, FEEDBACK_PARAMETER_CHARS),
            "value": sanitize(c.value, FEEDBACK_VALUE_CHARS),
            "message": sanitize(c.message, FEEDBACK_MESSAGE_CHARS),
            "source": sanitize(c.source, FEEDBACK_SOURCE_CHARS),
        }
        for c in list(checks)[:MAX_UNTRUSTED_ITEMS]
    ]
    return f"<validator_feedback>\n{_json_data(items)}\n</validator_feedback>"


def gather_untrusted(ctx: PlanningContext) -> list[str]:
    """Untrusted text for the data block: ``ctx.untrusted_text`` plus failure messages, server log
    lines and recovery log excerpts of earlier rounds (labelled with their round)."""
    items: list[str] = []
    for r in ctx.rounds[-MAX_ROUNDS:]:
        if r.failure is not None:
            items.append(f"round {r.round_no} {r.failure.phase} error: {r.failure.message}")
            items += [f"round {r.round_no} server log: {line}" for line in r.failure.logs[-FAILURE_LOG_LINES:]]
        if r.recovery is not None:
            items += [
                f"round {r.round_no} recovery log: {line}" for line in r.recovery.log_excerpt[-RECOVERY_LOG_LINES:]
            ]
    items += list(ctx.untrusted_text)
    return items


def compute_hypotheses(ctx: PlanningContext) -> list[Any]:
    """Bottleneck hypotheses from ``agenticdb.planner.diagnosis.diagnose`` when that module exists.

    Returns an empty list when the module is absent, when there are no statistics yet, or when the
    diagnosis raises (logged as ``llm.diagnosis_failed``): the LLM can still plan without them.
    """
    try:
        diagnosis = importlib.import_module("agenticdb.planner.diagnosis")
    except ImportError:
        return []
    diagnose = getattr(diagnosis, "diagnose", None)
    delta = current_delta(ctx)
    if diagnose is None or delta is None:
        return []
    family = ctx.catalog.target or ctx.fingerprint.dbms
    try:
        return list(diagnose(delta, ctx.profile, family, ctx.stage, latest_measurement(ctx)))
    except Exception as exc:  # noqa: BLE001 - a diagnosis bug must not take the planner down
        log.warning("llm.diagnosis_failed", error=str(exc))
        return []


def render_hypotheses(hypotheses: Sequence[Any]) -> str:
    """One line per hypothesis: ``bottleneck [layer] score: evidence`` or ``… ruled out (why)`` for a
    ``diagnosis.Hypothesis``; other pydantic models as compact JSON; anything else ``str()``."""
    if not hypotheses:
        return "(none computed; diagnose from the statistics above)"
    lines = []
    for h in hypotheses:
        bottleneck, score = getattr(h, "bottleneck", None), getattr(h, "score", None)
        if bottleneck is not None and isinstance(score, float):
            layer = getattr(h, "layer", None)
            head = (
                f"- {getattr(bottleneck, 'value', bottleneck)}"
                + (f" [{getattr(layer, 'value', layer)}]" if layer is not None else "")
                + f" score {score:.2f}: "
            )
            ruled_out = getattr(h, "ruled_out", None)
            body = (
                f"ruled out ({ruled_out})"
                if ruled_out
                else "; ".join(str(e) for e in getattr(h, "evidence", []) or []) or "no evidence"
            )
            lines.append(head + sanitize(body, HYPOTHESIS_CHARS))
        elif hasattr(h, "model_dump"):
            lines.append(
                "- "
                + sanitize(
                    json.dumps(h.model_dump(mode="json", exclude_none=True), separators=(",", ":")),
                    OTHER_HYPOTHESIS_CHARS,
                )
            )
        else:
            lines.append("- " + sanitize(h, OTHER_HYPOTHESIS_CHARS))
    return "\n".join(lines)


def render_context(ctx: PlanningContext, hypotheses: Sequence[Any] | None = None) -> str:
    """The user message of a planning request, from ``prompts/context.txt``.

    Args:
        ctx: the planning context.
        hypotheses: bottleneck hypotheses; ``None`` computes them with ``compute_hypotheses``.
    """
    if hypotheses is None:
        hypotheses = compute_hypotheses(ctx)
    current = {**ctx.profile.current_config, **ctx.current_config}
    return render_prompt(
        "context",
        policy=render_policy(ctx),
        profile=render_profile(ctx),
        fingerprint=render_fingerprint(ctx),
        statistics=render_statistics(current_delta(ctx)),
        hypotheses=render_hypotheses(hypotheses),
        rounds=render_rounds(ctx.rounds),
        experience=render_experience(ctx.experience),
        feedback=render_feedback(ctx.validator_feedback),
        stage=ctx.stage.value,
        catalog=render_catalog(ctx.catalog, ctx.stage, current),
        untrusted=quote_untrusted(gather_untrusted(ctx)),
    )
