"""Markdown table and PNG (objective over wall-clock time) from the runner's summaries."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers
import matplotlib.pyplot as plt


def _f(x: float | None, nd: int = 2) -> str:
    return "—" if x is None else f"{x:,.{nd}f}"


def _ms(xs: list[float]) -> str:
    if not xs:
        return "—"
    return f"{statistics.median(xs):.1f} (max {max(xs):.1f})"


def _row(r: dict, share: bool) -> str:
    res = r["result"]
    spread = "—" if not r["spread"] else f"{_f(r['spread'][0])}–{_f(r['spread'][1])}"
    name = r["competitor"] + (f" — {res['label']}" if res.get("label") else "")
    # a peer whose tool died gave no advice: its configuration is the start, not "advised nothing"
    verdict = f"could not advise: {res['could_not_advise']}" if res.get("could_not_advise") else r["verdict_vs_default"]
    line = (
        f"| {name} | {_f(r['median'])} | {spread} | {_f(r['tps_median'], 0)} | "
        f"{_f(r['p95_median_ms'])} | {100 * r['gain_vs_default']:+.1f} % | "
        f"{verdict} | {res['time_to_best_s'] / 60:.1f} | {res['rounds']} | "
        f"{res['failed']} / {res['recovered']} | {res['rejected']} | {res['left_down']} |"
    )
    if share:
        x = r.get("share_of_oracle_gain")
        line += " — |" if x is None else f" {100 * x:.0f} % |"
    return line


def markdown(summaries: list[dict]) -> str:
    """One table per scenario plus latency/overhead lines."""
    out = []
    for s in summaries:
        direction = "higher is better" if s["higher_is_better"] else "lower is better"
        out.append(
            f"### {s['scenario']}\n\n{s['about']}  \nbudget {s['budget_min']} min per competitor, "
            f"{s['repeats']} interleaved re-measurements per final configuration, objective "
            f"({direction}); measured noise (median CV of the re-measurements) "
            f"{100 * s['noise_cv']:.1f} %, so a difference must exceed "
            f"{250 * s['noise_cv']:.1f} % and agree in every pair to count. Wall time "
            f"{s.get('wall_min', '?')} min; server OOM kills {s.get('server_oom_kills', 0)}; "
            f"re-measurement failures {s.get('remeasure_failures', 0)}.\n"
        )
        oracle = s.get("oracle") or {}
        share = bool(oracle.get("ran"))
        if share:
            out.append(
                "Share of oracle gain = (competitor − default) / (oracle − default) on re-measured medians"
                + (f" (oracle: {oracle.get('reason')})" if not oracle.get("shown") else "")
                + ".\n"
            )
        out.append(
            "| competitor | objective median | spread (min–max) | TPS | p95 ms | gain vs default | "
            "verdict | time-to-best (min) | rounds/trials | failed / recovered | rejected | left down |"
            + (" share of oracle gain |" if share else "")
        )
        out.append("|---" * (13 if share else 12) + "|")
        for r in s["rows"]:
            out.append(_row(r, share))
        out.append("")
        for r in s["rows"]:
            res = r["result"]
            bits = [f"could not advise: {res['could_not_advise']}"] if res.get("could_not_advise") else []
            if r.get("same_configuration_as"):
                bits.append(
                    f"the same configuration as {r['same_configuration_as']}: re-measured as one arm, its runs shared"
                )
            if r["agenticdb_vs"]:
                bits.append(
                    "vs " + ", ".join(f"{k}: {v[0]} ({100 * v[1]:+.1f} %)" for k, v in r["agenticdb_vs"].items())
                )
            if res["validator_ms"]:
                bits.append(f"validator ms/proposal {_ms(res['validator_ms'])}")
            if res["planner_ms"]:
                bits.append(f"planner ms/proposal {_ms(res['planner_ms'])}")
            if res["overhead"]:
                o = res["overhead"]
                bits.append(
                    f"agent CPU {o['agent_cpu_s']} s over {o['wall_s']} s "
                    f"({o['agent_cpu_pct_of_one_core']} % of one core), "
                    f"peak RSS {o['agent_peak_rss_mib']} MiB"
                )
            if res["changes"]:
                bits.append("final changes: " + ", ".join(f"{k}={v}" for k, v in sorted(res["changes"].items())))
            bits += res["notes"]
            out.append(f"- **{r['competitor']}**: " + "; ".join(bits) if bits else f"- **{r['competitor']}**: —")
        if s.get("seed", {}).get("scenario"):
            out.append(
                f"- experience seed: scenario {s['seed']['scenario']}, {s['seed'].get('rounds')} rounds, "
                f"best changes {s['seed'].get('changes')}"
            )
        out.append("")
    return "\n".join(out)


def best_so_far(values: list[float], higher_is_better: bool) -> list[float]:
    """The running best of ``values`` (max when higher is better, else min): a "best so far" line never
    falls (issue 39: agenticdb's fell at the end of a session when a kept configuration re-measured
    lower on a busier host)."""
    out: list[float] = []
    for v in values:
        out.append(v if not out else (max if higher_is_better else min)(out[-1], v))
    return out


def plot(summary: dict, path: Path) -> Path:
    """Best-so-far objective over the competitor's wall-clock time, with each trial as a dot and the
    re-measured medians of static/default as horizontal lines."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in summary["rows"]:
        tr = r["result"]["trace"]
        name = r["competitor"]
        if tr:
            ts = [p["t_s"] / 60 for p in tr]
            best = best_so_far([p["best"] for p in tr], summary["higher_is_better"])
            line = ax.step(ts, best, where="post", label=f"{name} (best so far)")
            ax.scatter(ts, [p["objective"] for p in tr], s=12, color=line[0].get_color(), alpha=0.5)
        elif r["median"] is not None:
            ax.axhline(
                r["median"],
                linestyle="--",
                linewidth=1,
                label=f"{name} (re-measured median)",
                color={"default": "grey", "static": "black"}.get(name),
            )
    ax.set_xlabel("wall-clock time of the competitor (min)")
    ax.set_ylabel("objective" + (" (higher is better)" if summary["higher_is_better"] else " (s, lower is better)"))
    ax.set_title(f"{summary['scenario']}: objective over time")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(summaries: list[dict], out: Path) -> tuple[Path, list[Path]]:
    """results.md and one <scenario>.png under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    md = out / "results.md"
    md.write_text("# Benchmark results\n\n" + markdown(summaries))
    pngs = [plot(s, out / f"{s['scenario']}.png") for s in summaries]
    return md, pngs
